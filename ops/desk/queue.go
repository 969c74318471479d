package desk

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
)

// QueueFilter narrows the operator queues.
type QueueFilter struct {
	Status   ops.Status // one of the open statuses: the tab
	TenantID int64
	Kind     ops.Kind
	Provider string
	// OlderThan keeps operations created at least this long before Now.
	OlderThan time.Duration
	Now       time.Time
	// Search matches an order, customer or chat reference, an operation id or a provider key.
	Search string
	// Awaiting keeps operations with a close proposal awaiting approval (ops rule 13).
	Awaiting bool
	// After is the keyset cursor: the last row of the previous page.
	After *QueueCursor
	Limit int
}

// QueueCursor is the position of one row in a queue sorted oldest first.
type QueueCursor struct {
	CreatedAt time.Time
	ID        string
}

// QueuePage is one page of a queue.
type QueuePage struct {
	Ops  []*ops.Operation
	Next *QueueCursor
}

// QueueCountCap is where counts that need a scan stop: a count above it means "more than
// QueueCountCap". Unknown and expired counts are exact without an age or search filter.
const QueueCountCap = 1000

// CountIsCapped reports whether a queue count for status under f may stop at QueueCountCap.
// Received and in-progress rows are few in a healthy system and are counted from their
// indexes, so the hot path of an operation fires no counting trigger.
func CountIsCapped(s ops.Status, f QueueFilter) bool {
	return f.OlderThan > 0 || f.Search != "" || f.Awaiting || s == ops.StatusInProgress || s == ops.StatusReceived
}

// Queues reads the operator queues. Counts come from a maintained source, never a scan.
type Queues interface {
	QueueCounts(ctx context.Context, f QueueFilter) (map[ops.Status]int64, error)
	ListQueue(ctx context.Context, f QueueFilter, now time.Time) (QueuePage, error)
}
