package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
)

// ExceptionKind says what reconciliation found wrong.
type ExceptionKind string

// The kinds of exception. The first four compare the ledger with the provider's records
// directly; charge_on_failed and usage_mismatch are the same facts seen from a
// closed-as-failed operation and from an LLM usage report.
const (
	// ExceptionDoubleCharge: two or more provider charges for one operation (ops rule 3).
	ExceptionDoubleCharge ExceptionKind = "double_charge"
	// ExceptionOrphanCharge: a provider charge that names no operation of ours.
	ExceptionOrphanCharge ExceptionKind = "orphan_charge"
	// ExceptionMissingCharge: an operation we closed as succeeded that the provider does
	// not show.
	ExceptionMissingCharge ExceptionKind = "missing_charge"
	// ExceptionExplainedUnknown: an unknown, expired or stalled operation a provider record
	// explained; the reconciler closed it with that record as evidence.
	ExceptionExplainedUnknown ExceptionKind = "explained_unknown"
	// ExceptionChargeOnFailed: the provider charged for an operation we closed as failed.
	ExceptionChargeOnFailed ExceptionKind = "charge_on_failed"
	// ExceptionUsageMismatch: an LLM provider billed more (or fewer) requests in a time
	// bucket than the attempts we sent explain.
	ExceptionUsageMismatch ExceptionKind = "usage_mismatch"
	// ExceptionFailedAfterSuccess: a refund the provider accepted (pending) failed or was
	// canceled later; the customer was told it was on its way.
	ExceptionFailedAfterSuccess ExceptionKind = "failed_after_success"
)

// ExceptionKinds lists every kind in the order the queue offers them.
var ExceptionKinds = []ExceptionKind{ExceptionDoubleCharge, ExceptionOrphanCharge, ExceptionMissingCharge,
	ExceptionChargeOnFailed, ExceptionFailedAfterSuccess, ExceptionUsageMismatch, ExceptionExplainedUnknown}

// Valid reports whether k is a known kind.
func (k ExceptionKind) Valid() bool {
	for _, v := range ExceptionKinds {
		if v == k {
			return true
		}
	}
	return false
}

// ExceptionStatus is where a person's handling of an exception stands.
type ExceptionStatus string

// The exception statuses.
const (
	ExceptionOpen         ExceptionStatus = "open"
	ExceptionAcknowledged ExceptionStatus = "acknowledged"
	ExceptionResolved     ExceptionStatus = "resolved"
)

// ExceptionStatuses lists the statuses in workflow order.
var ExceptionStatuses = []ExceptionStatus{ExceptionOpen, ExceptionAcknowledged, ExceptionResolved}

// Valid reports whether s is a known status.
func (s ExceptionStatus) Valid() bool {
	return s == ExceptionOpen || s == ExceptionAcknowledged || s == ExceptionResolved
}

// Severity says how urgently an exception needs a person.
type Severity string

// The severities, from least to most urgent.
const (
	SeverityLow      Severity = "low"
	SeverityMedium   Severity = "medium"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Severities lists the severities from least to most urgent.
var Severities = []Severity{SeverityLow, SeverityMedium, SeverityHigh, SeverityCritical}

// Valid reports whether s is a known severity.
func (s Severity) Valid() bool {
	for _, v := range Severities {
		if v == s {
			return true
		}
	}
	return false
}

// DefaultSeverity is how urgent a new exception of kind k is: money that left twice or that
// a customer was told about comes first.
func DefaultSeverity(k ExceptionKind) Severity {
	switch k {
	case ExceptionMissingCharge:
		return SeverityCritical
	case ExceptionDoubleCharge, ExceptionChargeOnFailed, ExceptionFailedAfterSuccess:
		return SeverityHigh
	case ExceptionOrphanCharge, ExceptionUsageMismatch:
		return SeverityMedium
	default:
		return SeverityLow
	}
}

// Exception is one thing reconciliation found wrong, and a person's handling of it.
type Exception struct {
	ID          int64
	Kind        ExceptionKind
	Provider    string
	Ref         string
	TenantID    int64
	OperationID string
	ChargeRefs  []string
	Severity    Severity
	Status      ExceptionStatus
	Assignee    string
	Note        string
	Summary     string
	AmountCents int64
	Currency    string
	// Details is what the reconciler saw when it recorded the finding (JSON).
	Details     json.RawMessage
	Version     int64
	SeenCount   int
	FirstSeenAt time.Time
	LastSeenAt  time.Time
	UpdatedAt   time.Time
	ResolvedAt  *time.Time
	ResolvedBy  string
}

// Finding is what a reconciler run reports; the store turns it into an exception once.
type Finding struct {
	Kind        ExceptionKind
	Provider    string
	Ref         string
	TenantID    int64
	OperationID string
	ChargeRefs  []string
	Summary     string
	AmountCents int64
	Currency    string
	Details     json.RawMessage
	// Severity, when set, overrides the kind's default severity for a new exception.
	Severity Severity
	// Resolved records the finding as already handled (the reconciler closed the
	// operation itself); Note then says how.
	Resolved bool
	Note     string
	Actor    string
	At       time.Time
}

// ExceptionAction is what a person does to an exception.
type ExceptionAction string

// The actions of the exception workflow.
const (
	ActionAcknowledge ExceptionAction = "acknowledge"
	ActionAssign      ExceptionAction = "assign"
	ActionResolve     ExceptionAction = "resolve"
	ActionReopen      ExceptionAction = "reopen"
	ActionSeverity    ExceptionAction = "severity"
	ActionNote        ExceptionAction = "note"
)

// ExceptionChange is one person's change to one exception, guarded by the version they saw.
type ExceptionChange struct {
	ID       int64
	Version  int64
	Action   ExceptionAction
	Assignee string
	Severity Severity
	Note     string
	Actor    string
	At       time.Time
}

// MaxNoteLength bounds a note, in characters as the form's field counts them: it is read by
// people, not pasted logs.
const MaxNoteLength = 2000

// Apply checks the change against the exception as it is and returns the exception as it
// would be after it. The store repeats the version guard, so a stale change loses cleanly.
func (c ExceptionChange) Apply(cur *Exception) (*Exception, error) {
	if strings.TrimSpace(c.Actor) == "" {
		return nil, ops.Errorf(ops.EINVALID, "A change needs an actor.")
	}
	if c.Version != cur.Version {
		return nil, ops.Errorf(ops.ECONFLICT, "Exception %d changed since you looked (version %d, now %d, %s). Reload and try again.",
			cur.ID, c.Version, cur.Version, cur.Status)
	}
	note := strings.TrimSpace(c.Note)
	if utf8.RuneCountInString(note) > MaxNoteLength {
		return nil, ops.Errorf(ops.EINVALID, "The note is longer than %d characters.", MaxNoteLength)
	}
	if err := ops.CheckNote("The note", note); err != nil {
		return nil, err
	}
	next := *cur
	if note != "" {
		next.Note = note
	}
	switch c.Action {
	case ActionAcknowledge:
		if cur.Status != ExceptionOpen {
			return nil, ops.Errorf(ops.ECONFLICT, "Exception %d is %s; only an open one can be acknowledged.", cur.ID, cur.Status)
		}
		next.Status = ExceptionAcknowledged
		if next.Assignee == "" {
			next.Assignee = c.Actor
		}
	case ActionAssign:
		a := strings.TrimSpace(c.Assignee)
		if len(a) > 254 {
			return nil, ops.Errorf(ops.EINVALID, "The assignee is longer than 254 characters.")
		}
		if err := ops.CheckRef("The assignee", a, 254); err != nil {
			return nil, err
		}
		if !ops.Shows(a) {
			// The queue names an exception's owner by this text alone (ops.Shows).
			return nil, &ops.Error{Code: ops.EINVALID, Reason: ops.ReasonInvalidField,
				Message: "The assignee holds an invisible character, a direction override or a space that is not one; write it as people read it."}
		}
		if cur.Status == ExceptionResolved {
			return nil, ops.Errorf(ops.ECONFLICT, "Exception %d is resolved; reopen it before assigning it.", cur.ID)
		}
		next.Assignee = a
	case ActionResolve:
		if cur.Status == ExceptionResolved {
			return nil, ops.Errorf(ops.ECONFLICT, "Exception %d is already resolved by %s.", cur.ID, cur.ResolvedBy)
		}
		if note == "" {
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "note_required", Message: "Resolving needs a note: say what you found and did."}
		}
		next.Status, next.ResolvedBy = ExceptionResolved, c.Actor
		at := c.At
		next.ResolvedAt = &at
	case ActionReopen:
		if cur.Status != ExceptionResolved {
			return nil, ops.Errorf(ops.ECONFLICT, "Exception %d is %s, not resolved.", cur.ID, cur.Status)
		}
		if note == "" {
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "note_required", Message: "Reopening needs a note: say why."}
		}
		next.Status, next.ResolvedAt, next.ResolvedBy = ExceptionOpen, nil, ""
	case ActionSeverity:
		if !c.Severity.Valid() {
			return nil, ops.Errorf(ops.EINVALID, "Unknown severity %q; use low, medium, high or critical.", c.Severity)
		}
		next.Severity = c.Severity
	case ActionNote:
		if note == "" {
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "note_required", Message: "The note is empty."}
		}
	default:
		return nil, ops.Errorf(ops.EINVALID, "Unknown action %q.", c.Action)
	}
	return &next, nil
}

// ExceptionFilter narrows the exception queue.
type ExceptionFilter struct {
	Status   ExceptionStatus
	Kind     ExceptionKind
	Severity Severity
	Provider string
	TenantID int64
	// BeforeID is the keyset cursor: the last id of the previous page (newest first).
	BeforeID int64
	Limit    int
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	At     time.Time
	Actor  string
	Action string
	Reason string
	Before json.RawMessage
	After  json.RawMessage
}

// ProviderCharge is a provider record as recorded in provider_charges.
type ProviderCharge struct {
	ID          int64
	TenantID    int64
	Provider    string
	Ref         string
	OperationID string
	AmountCents int64
	Currency    string
	Status      string
	ChargedAt   time.Time
	SeenAt      time.Time
	Raw         json.RawMessage
}

// Charged reports whether the provider counts the record as money moved.
func (c ProviderCharge) Charged() bool {
	return ops.ProviderRecord{Status: c.Status}.Charged()
}

// DoubleCharge is one operation with more than one charged provider record.
type DoubleCharge struct {
	OperationID string
	TenantID    int64
	Charges     []ProviderCharge
}

// Window is a time range [From, To) that reconciliation or a report covers.
type Window struct {
	From, To time.Time
}

// CheckWindow refuses a window that is reversed, empty or reaches into the future: a
// reconciliation of time that has not happened would record nothing and look complete.
func CheckWindow(w Window, now time.Time) error {
	switch {
	case w.From.IsZero() || w.To.IsZero():
		return ops.Errorf(ops.EINVALID, "The window needs a start and an end.")
	case !w.To.After(w.From):
		return ops.Errorf(ops.EINVALID, "The window is reversed or empty: it starts at %s and ends at %s.",
			w.From.UTC().Format(time.RFC3339), w.To.UTC().Format(time.RFC3339))
	case w.From.After(now):
		return ops.Errorf(ops.EINVALID, "The window starts in the future (%s); it is now %s.",
			w.From.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case w.To.After(now):
		return ops.Errorf(ops.EINVALID, "The window ends in the future (%s); it is now %s. End it now or earlier.",
			w.To.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Lease is one provider's reconciler as the pages show it: who holds its lease (Until is
// nil when nobody does) and how far its background runs have got.
type Lease struct {
	Name       string
	Owner      string
	Until      *time.Time
	DoneUntil  *time.Time
	LastRunAt  *time.Time
	LastReport json.RawMessage
}

// UsageRow is one line of an LLM provider's usage report: what one API key was billed for
// one model in one time bucket.
type UsageRow struct {
	// Report names the provider's report the row comes from, when it keeps more than one
	// (OpenAI reports embeddings apart from completions); "" is its main one.
	Report       string
	Start        time.Time
	Width        time.Duration
	APIKeyID     string
	Model        string
	Requests     int64
	InputTokens  int64
	OutputTokens int64
}

// SentRow is what Settle sent to an LLM provider in one time bucket for one model: every
// attempt that left, those answered (or explained by a completion a lookup found in the
// provider's store), and those whose outcome is still uncertain (and so may have been
// billed).
type SentRow struct {
	// Route is the gateway route of the API the attempts called, as their operation kept it
	// ("" for one that kept none, counted as chat completions): it says which of the
	// provider's usage reports counts them (UsageReports).
	Route     string
	Start     time.Time
	Model     string
	Sent      int64
	OK        int64
	Uncertain int64
}

// SentPrompt is what Settle sent to an LLM provider whose usage report counts prompt tokens
// instead of requests (PromptTokenReport), in one time bucket: one attempt whose outcome is
// uncertain, or the answered attempts of one model summed (their operation fields empty), or
// those of one model refused with one outcome.
type SentPrompt struct {
	Start time.Time
	// Model is the model as the provider named it in the answer, or as the call asked for it
	// when no answer came.
	Model       string
	OperationID string
	TenantID    int64
	Attempt     int
	// Outcome is the attempt's, "" while it is in flight; Status is its operation's now.
	Outcome ops.Outcome
	Status  ops.Status
	// PromptTokens is the prompt's size in tokens, cache included, as the provider counted it
	// in this attempt's answer or, since every attempt of an operation sends the same request,
	// in the answer of another attempt of it; 0 when no attempt of the operation was answered.
	// Of summed attempts, it is their prompts' sum.
	PromptTokens int64
	// Count is how many attempts the row stands for, Unsized how many of them carry no prompt
	// size.
	Count, Unsized int64
}

// MatchedCharge is what recording a charge that confirms the ledger found of it.
type MatchedCharge struct {
	// Known says the charge was recorded before.
	Known bool
	// Shared says another charge names the same operation: a double charge to look at.
	Shared bool
}

// Store is what the reconciler needs from its own store: the provider charges, findings,
// runs and usage reports. The ledger's EventStore and the leases are the Reconciler's Events
// and Leases, given apart because they are the ledger's store, not the reconciler's.
type Store interface {
	// KnownCharges returns which of refs are recorded already for the provider.
	KnownCharges(ctx context.Context, provider string, refs []string) (map[string]bool, error)
	// RecordMatchedCharges records, together and as reconciled, the records that only
	// confirm what the ledger holds: each names an operation of the record's own account
	// that succeeded with that very charge, and is charged, and is either new or unchanged
	// since it was last seen. It returns what it found of each by ref; the others are left
	// for the ledger, one by one.
	RecordMatchedCharges(ctx context.Context, provider string, recs []ops.ProviderRecord, seenAt time.Time) (map[string]MatchedCharge, error)
	// MarkReconciled records that the provider's own listing or lookup showed these charges.
	MarkReconciled(ctx context.Context, provider string, refs []string, at time.Time) error
	// DoubleCharges returns the operations, among those the given charges belong to, that
	// hold more than one charged record.
	DoubleCharges(ctx context.Context, provider string, refs []string) ([]DoubleCharge, error)
	// MissingCandidates lists operations closed as succeeded at the provider, created in the
	// window, with no charged record that a reconciliation saw at the provider, and no
	// missing-charge exception yet.
	MissingCandidates(ctx context.Context, provider string, w Window, limit int) ([]*ops.Operation, error)
	// RecordFinding records a finding as an exception once per (kind, provider, ref); a
	// repeat updates when it was last seen and the charges involved. created says whether
	// this call made the row.
	RecordFinding(ctx context.Context, f Finding) (ex *Exception, created bool, err error)
	// ReconRun returns how far the named reconciler's background runs have got.
	ReconRun(ctx context.Context, name string) (Lease, error)
	// RecordRun records a run of the reconciler whose lease is l, when l is still held with
	// its token; doneUntil, when set, moves the background watermark. recorded is false when
	// the lease was lost, and nothing was written.
	RecordRun(ctx context.Context, l ops.Lease, now time.Time, doneUntil *time.Time, report json.RawMessage) (recorded bool, err error)
	// RecordUsage stores an LLM usage report, one row per bucket, key and model; a repeat
	// replaces the numbers. It returns how many rows were new.
	RecordUsage(ctx context.Context, provider string, rows []UsageRow, seenAt time.Time) (int, error)
	// SentToLLM counts the attempts sent to an LLM provider per bucket and model.
	SentToLLM(ctx context.Context, provider string, w Window, width time.Duration) ([]SentRow, error)
	// SentPrompts lists what was sent to an LLM provider in w (every attempt but those that
	// never left) per bucket of width: each uncertain attempt with its prompt's size when
	// Settle learned it, and the other attempts summed per model and outcome.
	SentPrompts(ctx context.Context, provider string, w Window, width time.Duration) ([]SentPrompt, error)
	// UnknownLLM lists up to limit llm_call and llm_job operations of the provider that
	// have been unknown or expired since before, newest first.
	UnknownLLM(ctx context.Context, provider string, before time.Time, limit int) ([]*ops.Operation, error)
}

// ExceptionStore is what the exception queue needs.
type ExceptionStore interface {
	// ListExceptions returns one page of the queue, newest first.
	ListExceptions(ctx context.Context, f ExceptionFilter) ([]*Exception, error)
	// CountExceptions counts exceptions per status, with the filter's other fields.
	CountExceptions(ctx context.Context, f ExceptionFilter) (map[ExceptionStatus]int64, error)
	// GetException returns one exception or ENOTFOUND.
	GetException(ctx context.Context, id int64) (*Exception, error)
	// UpdateException writes next if the row is still at the version cur was read at, with
	// its audit row in the same statement. A lost race is ECONFLICT.
	UpdateException(ctx context.Context, cur, next *Exception, c ExceptionChange) (*Exception, error)
	// ExceptionCharges returns the provider's records behind an exception.
	ExceptionCharges(ctx context.Context, ex *Exception) ([]ProviderCharge, error)
	// Audit returns the audit log of one entity, oldest first.
	Audit(ctx context.Context, entity, id string) ([]AuditEntry, error)
}

// ChangeException applies a person's change to an exception through the compare-and-set:
// two people acting at once, one wins and the other is told to reload.
func ChangeException(ctx context.Context, s ExceptionStore, c ExceptionChange) (*Exception, error) {
	cur, err := s.GetException(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	next, err := c.Apply(cur)
	if err != nil {
		return nil, err
	}
	out, err := s.UpdateException(ctx, cur, next, c)
	if err != nil {
		return nil, fmt.Errorf("change exception %d: %w", c.ID, err)
	}
	return out, nil
}
