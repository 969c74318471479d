package ops

import (
	"context"
	"encoding/json"
	"time"
)

// Store keeps operations and everything recorded about them. Every method is one short
// transaction; none is ever held across a provider call (rule 7). Implementations guard
// every change with the same conditions the domain checks, so a stale caller loses cleanly.
type Store interface {
	// Open inserts op unless an open operation exists for its intent, and records the client
	// request either way. When the operation is new and Claim is set, it is committed already
	// in progress with its first attempt begun, so that the key and the attempt are on disk
	// before anything is sent (rule 1).
	Open(ctx context.Context, p OpenParams) (Opened, error)
	// Join records a client request as a duplicate of an existing operation, whatever its
	// status now, and returns the operation as it is.
	Join(ctx context.Context, opID, requestRef string, now time.Time) (Opened, error)
	// Get returns one operation or an ENOTFOUND error.
	Get(ctx context.Context, id string) (*Operation, error)
	// Claim gives owner a lease on op if it is still at version and claimable (received, or
	// in progress with a lease that ran out).
	Claim(ctx context.Context, p ClaimParams) (*Operation, error)
	// BeginAttempt records attempt n+1 and counts it on the operation, guarded by owner's
	// lease, the key retention and the attempt budget.
	BeginAttempt(ctx context.Context, p BeginParams) (*Operation, *Attempt, error)
	// Transition moves op from (Status, Version) to To, finishing an attempt, writing
	// evidence, audit and outbox rows and answering a client request, all in one transaction.
	// A lost compare-and-set returns ECONFLICT naming who closed it.
	Transition(ctx context.Context, p TransitionParams) (*Operation, error)
	// SetPhase records how far owner's attempt got and extends its lease to leaseUntil, or
	// leaves the lease as it is when leaseUntil is zero, without a new version or an audit
	// row: progress is not a decision.
	SetPhase(ctx context.Context, id, owner string, phase Phase, leaseUntil, now time.Time) (*Operation, error)
	// AnswerClientRequest records how a client request was answered.
	AnswerClientRequest(ctx context.Context, id int64, a Answer, at time.Time) error
	// RefuseClientRequest records that a client request admitted earlier was refused
	// (AnswerRejected) for reason, in the one statement that answers it.
	RefuseClientRequest(ctx context.Context, id int64, reason string, at time.Time) error
	// ClaimStalled leases up to limit stalled operations to owner (skipping rows others hold)
	// and records their dangling attempts as timeouts.
	ClaimStalled(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*Operation, error)
	// ExpireDue moves up to limit open operations past their key retention to expired.
	ExpireDue(ctx context.Context, actor string, now time.Time, limit int) (int, error)
	// Attempts lists an operation's attempts in order.
	Attempts(ctx context.Context, opID string) ([]Attempt, error)
	// LatestForIntent returns the newest operation of an intent, whatever its status, or
	// ENOTFOUND.
	LatestForIntent(ctx context.Context, tenantID int64, kind Kind, intentKey string) (*Operation, error)
	// RecordRequest records a client request that opens, joins and sends no operation (one
	// refused before any operation was opened, or a cancel of what one started), received
	// at at, and returns its id.
	RecordRequest(ctx context.Context, p RequestParams, at time.Time) (int64, error)
}

// RequestParams is what Store.RecordRequest needs: a client request that is neither a new
// intent nor a duplicate of one.
type RequestParams struct {
	TenantID int64
	// OperationID is the operation the request is about; "" when it names none of the
	// tenant's (refused before one was found).
	OperationID string
	Kind        Kind
	RequestRef  string
	// Answer, when set, answers the request as it is recorded; otherwise it is answered
	// later (Ledger.Answer), once its outcome is known.
	Answer Answer
	// Reason is why a refused request was refused, its refusal's ErrorReason ("" for a
	// request not refused): the built-in alert rules count refusals by it (rule 8).
	Reason string
}

// OpenParams is what Store.Open needs.
type OpenParams struct {
	Op         *Operation
	RequestRef string
	Now        time.Time
	// Claim, when set, leases a new operation to this owner and begins its first attempt.
	Claim      string
	LeaseUntil time.Time
	Actor      string
	// Latest guards the insert: create only if the newest operation of the intent is still
	// this one ("" for none). A failed guard is ECONFLICT with reason "superseded".
	Latest *string
	// API is the label of the API a new operation calls, as its kind's Call names it
	// (Call.Label: "responses"; "" for none). It is kept on the operation's row, so the
	// counts split by API outlive the purge of the request that names it.
	API string
}

// Opened is what Store.Open found or made.
type Opened struct {
	Op              *Operation
	Created         bool
	ClientRequestID int64
	// Attempt is the first attempt when the operation was created claimed.
	Attempt *Attempt
}

// ClaimParams is what Store.Claim needs.
type ClaimParams struct {
	ID         string
	Version    int64
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
}

// BeginParams is what Store.BeginAttempt needs.
type BeginParams struct {
	ID          string
	Version     int64
	Owner       string
	Now         time.Time
	MaxAttempts int
	// RetryUntil is set on the first send: now plus the provider's key retention, minus a
	// margin. Nil when the provider keeps no keys.
	RetryUntil *time.Time
}

// TransitionParams is what Store.Transition needs.
type TransitionParams struct {
	ID      string
	Version int64
	From    Status
	To      Status
	Phase   Phase
	Now     time.Time
	Actor   string
	Action  string
	Reason  string
	// Owner, when set, must still hold the lease; the lease is released by the change.
	Owner string
	// Lease, when set with To in_progress, is the new lease end (nil releases the lease).
	LeaseUntil *time.Time
	// RequireLeaseExpired refuses the change while any worker holds a live lease.
	RequireLeaseExpired bool
	Finish              *AttemptFinish
	Evidence            *Evidence
	Result              *Result
	// Request is the operation's request as the caller holds it, which the store puts on the
	// operation it returns instead of reading it back (a long prompt would cross the wire a
	// second time). A request never changes once its operation exists; the purge removes it,
	// and a purged operation comes back without it. Nil reads the stored one.
	Request       json.RawMessage
	AnswerRequest int64
	Answer        Answer
	// AnswerSince is the operation's creation, before which its client requests cannot have
	// been received: it keeps the answer's update to the months since (their partitions).
	// The store allows a day before it, since another replica's clock may have stamped the
	// request.
	AnswerSince time.Time
	// Approval, when set, is the approved proposal a close carries out (rule 13): the change
	// applies only while that proposal is open, marks it approved in the same transaction,
	// and names both people in the audit row and the outbox event.
	Approval *Approval
}

// Approval is a second person's approval of a proposal, carried by the close it allows.
// ProposedBy and ApprovedBy are the people as records show them; ProposerID and
// ApproverID are their dashboard accounts, which must differ (rule 13).
type Approval struct {
	ProposalID int64
	ProposedBy string
	ApprovedBy string
	ProposerID int64
	ApproverID int64
}

// AttemptFinish is the end of one attempt.
type AttemptFinish struct {
	AttemptID int64
	// StartedAt is when the attempt began: the store finds its row in that month's
	// partition instead of looking through every month.
	StartedAt         time.Time
	Outcome           Outcome
	HTTPStatus        int
	ProviderRequestID string
	ErrorCode         string
	FinishedAt        time.Time
	// Usage and CostMicros are what the attempt consumed, when the provider said; a nil
	// CostMicros means the cost is not known.
	Usage      json.RawMessage
	CostMicros *int64
	// PossibleDuplicate marks a send that followed an uncertain one of the same operation.
	PossibleDuplicate bool
}

// Result is what the provider returned, stored on the operation so replays need no call.
type Result struct {
	ProviderRef       string
	ProviderRequestID string
	Body              json.RawMessage
	Usage             json.RawMessage
	CostMicros        int64
	// Events are the events of the stream that delivered Body, as they were relayed to the
	// client, so that a replay sends the same events again; nil for an answer that was not
	// streamed. Stored with Body and purged with it.
	Events json.RawMessage
}
