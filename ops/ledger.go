package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Ledger applies the rules in the package documentation on top of a Store. Adapters (the refund tool, the
// LLM gateway, the job workers, the dashboard) go through it, never around it.
type Ledger struct {
	Store    Store
	Clock    Clock
	Limits   Limits
	Policies map[Kind]Policy
}

// NewLedger returns a ledger with the default limits and policies.
func NewLedger(s Store, c Clock) *Ledger {
	return &Ledger{Store: s, Clock: c, Limits: DefaultLimits, Policies: DefaultPolicies}
}

// Intent is what a client asks for: the fields that make it one intent and what to send.
type Intent struct {
	TenantID    int64
	Kind        Kind
	Provider    string
	IntentKey   string
	Fingerprint string
	OrderRef    string
	CustomerRef string
	ChatRef     string
	PaymentRef  string
	AmountCents int64
	Currency    string
	Request     []byte
	// Retention is how long the provider keeps idempotency keys (0: it keeps none).
	Retention time.Duration
	// Latest, when set, is the id of the newest operation of this intent the caller saw
	// ("" for none). Open then creates nothing if a newer one appeared meanwhile, and
	// answers ECONFLICT with reason "superseded": the caller's request is that one's
	// duplicate.
	Latest *string
}

func (in Intent) validate() error {
	switch {
	case in.TenantID <= 0:
		return Errorf(EINVALID, "A tenant is required.")
	case !in.Kind.Valid():
		return Errorf(EINVALID, "Unknown operation kind %q.", in.Kind)
	case in.Provider == "":
		return Errorf(EINVALID, "A provider is required.")
	case strings.TrimSpace(in.IntentKey) == "":
		return Errorf(EINVALID, "An intent key is required.")
	case len(in.IntentKey) > 512:
		return Errorf(EINVALID, "The intent key is longer than 512 characters.")
	case in.Fingerprint == "":
		return Errorf(EINVALID, "A fingerprint is required.")
	}
	return nil
}

// NewOperationID returns a new time-ordered operation id.
func NewOperationID() string { return uuid.Must(uuid.NewV7()).String() }

// NewProviderKey returns a new idempotency key for the provider: random, never derived from
// anything a client sends, so no two intents can share one.
func NewProviderKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return "settle_" + hex.EncodeToString(b[:])
}

// Open opens the operation for an intent, or finds the open one, and records the client
// request. A new operation is committed leased to owner with its first attempt begun, so the
// caller may send at once. An existing one with another fingerprint is refused.
func (l *Ledger) Open(ctx context.Context, in Intent, requestRef, owner string) (Opened, error) {
	if err := in.validate(); err != nil {
		return Opened{}, err
	}
	now := l.Clock.Now()
	op := &Operation{
		ID: NewOperationID(), TenantID: in.TenantID, Kind: in.Kind, Provider: in.Provider,
		IntentKey: in.IntentKey, ProviderKey: NewProviderKey(), Fingerprint: in.Fingerprint,
		OrderRef: in.OrderRef, CustomerRef: in.CustomerRef, ChatRef: in.ChatRef, PaymentRef: in.PaymentRef,
		AmountCents: in.AmountCents, Currency: in.Currency, Request: in.Request, Retention: in.Retention,
	}
	p := OpenParams{Op: op, RequestRef: requestRef, Now: now, Actor: owner, Latest: in.Latest}
	if owner != "" {
		p.Claim, p.LeaseUntil = owner, now.Add(l.Limits.Lease)
		if in.Retention > 0 {
			op.RetryUntil = ptr(now.Add(in.Retention - l.Limits.RetentionMargin))
		}
	}
	o, err := l.Store.Open(ctx, p)
	if err != nil {
		return Opened{}, fmt.Errorf("open operation: %w", err)
	}
	if !o.Created && o.Op.Fingerprint != in.Fingerprint {
		if err := l.Store.AnswerClientRequest(ctx, o.ClientRequestID, AnswerConflict, now); err != nil {
			return o, fmt.Errorf("answer client request: %w", err)
		}
		return o, Errorf(EINVALID, "This intent is already open as operation %s with other parameters.", o.Op.ID)
	}
	return o, nil
}

// Join records a client request for the intent of an operation already found, and
// returns the operation as it is now (it may have closed since it was found). Another
// fingerprint is refused as in Open.
func (l *Ledger) Join(ctx context.Context, opID, fingerprint, requestRef string) (Opened, error) {
	now := l.Clock.Now()
	o, err := l.Store.Join(ctx, opID, requestRef, now)
	if err != nil {
		return Opened{}, fmt.Errorf("join operation: %w", err)
	}
	if o.Op.Fingerprint != fingerprint {
		if err := l.Store.AnswerClientRequest(ctx, o.ClientRequestID, AnswerConflict, now); err != nil {
			return o, fmt.Errorf("answer client request: %w", err)
		}
		return o, Errorf(EINVALID, "This intent is already open as operation %s with other parameters.", o.Op.ID)
	}
	return o, nil
}

// Claim leases an existing operation to owner so it may send again, if it is claimable.
func (l *Ledger) Claim(ctx context.Context, op *Operation, owner string) (*Operation, error) {
	now := l.Clock.Now()
	switch {
	case op.Status == StatusReceived, op.Stalled(now), op.Status == StatusInProgress && op.LeaseUntil == nil:
	case op.Leased(now):
		return nil, Errorf(ECONFLICT, "Operation %s is being sent by another request.", op.ID)
	default:
		return nil, Errorf(ECONFLICT, "Operation %s is %s and cannot be claimed.", op.ID, op.Status)
	}
	return l.Store.Claim(ctx, ClaimParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now, LeaseUntil: now.Add(l.Limits.Lease)})
}

// BeginAttempt checks that owner may send op now and records the attempt before the send.
func (l *Ledger) BeginAttempt(ctx context.Context, op *Operation, owner string) (*Operation, *Attempt, error) {
	now := l.Clock.Now()
	if err := CheckSend(op, owner, now, l.Limits); err != nil {
		return nil, nil, err
	}
	var until *time.Time
	if op.RetryUntil == nil && op.Retention > 0 {
		until = ptr(now.Add(op.Retention - l.Limits.RetentionMargin))
	}
	return l.Store.BeginAttempt(ctx, BeginParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now, MaxAttempts: l.Limits.AttemptsPerOperation, RetryUntil: until})
}

// AttemptResult is what the adapter learned from one send.
type AttemptResult struct {
	Outcome           Outcome
	HTTPStatus        int
	ProviderRequestID string
	ErrorCode         string
	// RetryAfter is the provider's Retry-After, honoured by the next backoff.
	RetryAfter time.Duration
	// Usage and CostMicros are what this attempt consumed, when known (nil: not known).
	Usage      []byte
	CostMicros *int64
	// PossibleDuplicate marks a send that followed an uncertain send of the same operation.
	PossibleDuplicate bool
	// Result is set when the outcome is ok.
	Result *Result
	// Answer, with ClientRequestID, records how the client request was answered in the
	// same transaction.
	ClientRequestID int64
	Answer          Answer
}

// FinishAttempt records how attempt a of op ended and moves op where the rules say. The
// returned bool says whether the caller may send again in this call.
func (l *Ledger) FinishAttempt(ctx context.Context, op *Operation, a *Attempt, owner string, r AttemptResult) (*Operation, bool, error) {
	if !r.Outcome.Valid() {
		return nil, false, Errorf(EINVALID, "Unknown attempt outcome %q.", r.Outcome)
	}
	if r.Outcome == OutcomeOK && (r.Result == nil || r.Result.ProviderRef == "") {
		return nil, false, Errorf(EINVALID, "A successful attempt needs the provider's record id.")
	}
	now := l.Clock.Now()
	next, retry := NextStatus(op, r.Outcome, l.Policies[op.Kind], now, l.Limits)
	p := TransitionParams{
		ID: op.ID, Version: op.Version, From: op.Status, To: next, Now: now, Actor: owner, Owner: owner,
		Action: "attempt." + string(r.Outcome),
		Finish: &AttemptFinish{AttemptID: a.ID, Outcome: r.Outcome, HTTPStatus: r.HTTPStatus,
			ProviderRequestID: r.ProviderRequestID, ErrorCode: r.ErrorCode, FinishedAt: now,
			Usage: r.Usage, CostMicros: r.CostMicros, PossibleDuplicate: r.PossibleDuplicate},
		AnswerRequest: r.ClientRequestID, Answer: r.Answer,
	}
	if next == StatusInProgress {
		// Keep the lease for the next attempt of this call; the caller releases it when done.
		p.LeaseUntil = ptr(now.Add(l.Limits.Lease))
	}
	if r.Outcome == OutcomeOK {
		p.Result = r.Result
		p.Evidence = &Evidence{Kind: EvidenceProviderResponse, ProviderRef: r.Result.ProviderRef,
			Summary: "The provider answered the attempt with " + r.Result.ProviderRef + ".", RecordedBy: owner, RecordedAt: now}
	}
	if next.Final() || next == StatusUnknown || next == StatusExpired {
		p.Reason = "attempt " + string(r.Outcome)
	}
	out, err := l.Store.Transition(ctx, p)
	if err != nil {
		return nil, false, fmt.Errorf("finish attempt: %w", err)
	}
	return out, retry, nil
}

// Release gives up owner's lease on an in-progress operation without changing its status,
// so a later call may claim it at once. Used when a call's attempt budget is spent.
func (l *Ledger) Release(ctx context.Context, op *Operation, owner string, clientRequestID int64, a Answer) (*Operation, error) {
	now := l.Clock.Now()
	return l.Store.Transition(ctx, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusInProgress,
		Now: now, Actor: owner, Owner: owner, Action: "release", AnswerRequest: clientRequestID, Answer: a})
}

// MarkUnknown stops all sending for op until someone closes it.
func (l *Ledger) MarkUnknown(ctx context.Context, op *Operation, actor, reason string) (*Operation, error) {
	if err := CheckTransition(op.Status, StatusUnknown); err != nil {
		return nil, err
	}
	return l.Store.Transition(ctx, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusUnknown,
		Now: l.Clock.Now(), Actor: actor, Action: "mark_unknown", Reason: reason})
}

// Expire marks one operation past the provider's key retention as expired: from now on it
// is never sent again, and only a lookup or a person closes it.
func (l *Ledger) Expire(ctx context.Context, op *Operation, actor string) (*Operation, error) {
	now := l.Clock.Now()
	if !op.PastRetention(now) {
		return nil, Errorf(EINVALID, "Operation %s is still within the provider's key retention.", op.ID)
	}
	if err := CheckTransition(op.Status, StatusExpired); err != nil {
		return nil, err
	}
	return l.Store.Transition(ctx, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusExpired,
		Now: now, Actor: actor, Action: "expire", Reason: "past the provider's key retention", RequireLeaseExpired: true})
}

// CloseParams is what a person or process gives to close an operation.
type CloseParams struct {
	ID       string
	Version  int64
	To       Status
	Evidence Evidence
	Actor    string
}

// Close closes an operation nobody is sending for, with evidence (rule 6). Two closers
// racing on one row: one wins, the other gets ECONFLICT naming the winner.
func (l *Ledger) Close(ctx context.Context, p CloseParams) (*Operation, error) {
	if strings.TrimSpace(p.Actor) == "" {
		return nil, Errorf(EINVALID, "Closing needs an actor.")
	}
	op, err := l.Store.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if op.Version != p.Version && !op.Status.Final() {
		return nil, Errorf(ECONFLICT, "Operation %s changed since you looked (version %d, now %d, %s). Reload and try again.", op.ID, p.Version, op.Version, op.Status)
	}
	now := l.Clock.Now()
	if err := CheckClose(op, p.To, p.Evidence, now); err != nil {
		return nil, err
	}
	ev := p.Evidence
	ev.RecordedBy, ev.RecordedAt = p.Actor, now
	return l.Store.Transition(ctx, TransitionParams{ID: op.ID, Version: p.Version, From: op.Status, To: p.To,
		Now: now, Actor: p.Actor, Action: "close", Reason: ev.Summary, Evidence: &ev, RequireLeaseExpired: true,
		Result: resultFromEvidence(p.To, ev)})
}

func resultFromEvidence(to Status, ev Evidence) *Result {
	if to != StatusSucceeded || ev.ProviderRef == "" {
		return nil
	}
	return &Result{ProviderRef: ev.ProviderRef}
}

// ExpireDue marks every open operation past its key retention as expired.
func (l *Ledger) ExpireDue(ctx context.Context, actor string) (int, error) {
	total := 0
	for {
		n, err := l.Store.ExpireDue(ctx, actor, l.Clock.Now(), 500)
		total += n
		if err != nil || n < 500 {
			return total, err
		}
	}
}

func ptr[T any](v T) *T { return &v }
