package desk

import (
	"time"

	"github.com/settle-dev/settle/ops"
)

// Timeline is everything recorded about one operation, each part in time order.
type Timeline struct {
	Requests []ops.ClientRequest
	Attempts []ops.Attempt
	Evidence []ops.Evidence
	Events   []ProviderEventRecord
	Audit    []AuditLogEntry
}

// ProviderEventRecord is a provider event (a webhook) as it was recorded and applied.
type ProviderEventRecord struct {
	Provider   string
	EventID    string
	Type       string
	ObjectRef  string
	Outcome    string
	ReceivedAt time.Time
}

// AuditFilter narrows the audit log. Empty fields match everything.
type AuditFilter struct {
	Actor    string
	Action   string
	EntityID string
	// From and To bound the time, To excluded.
	From, To time.Time
	After    *AuditCursor
	Limit    int
}

// AuditCursor is the position of one entry in the audit log, newest first.
type AuditCursor struct {
	At time.Time
	ID int64
}

// AuditPage is one page of the audit log.
type AuditPage struct {
	Entries []AuditLogEntry
	Next    *AuditCursor
}

// UserAccount is a dashboard user as an admin sees it.
type UserAccount struct {
	User
	DisabledAt *time.Time
	// OpenFollows counts the open operations the user follows. A disabled user's follows
	// are stopped: they send the user nothing until the user is enabled again.
	OpenFollows int
}

// APIToken is an API token as an admin sees it: its tenant, label and first characters,
// never the token, which only its holder has.
type APIToken struct {
	ID        int64
	Tenant    string
	Name      string
	Prefix    string
	CreatedAt time.Time
	// LastUsedAt is when the token last authenticated a call, to the minute; nil if never.
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}
