package ops

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Ledger applies the rules of this package on top of a Store. Every flow (the refund tool,
// the LLM gateway, the job workers, the desk, the reconciler, the webhook, the reaper)
// changes operations through it; its store is not reachable from outside, so no flow can
// skip a check.
type Ledger struct {
	store  Store
	Clock  Clock
	Limits Limits
	Logger *slog.Logger
	// Gate, when set, must be open for a client request to be admitted: a serving replica
	// gates admission by its clock's skew (SkewGuard), since every admission takes or
	// judges an operation's lease by this process's clock.
	Gate Gate

	// specs are the registered kinds in their order, kinds their index by kind.
	specs []KindSpec
	kinds map[Kind]int
}

// NewLedger returns a ledger with the default limits and no kind registered yet.
func NewLedger(s Store, c Clock) *Ledger {
	return &Ledger{store: s, Clock: c, Limits: DefaultLimits}
}

// ReasonSuperseded is the reason of the ECONFLICT the opening of an operation answers when a
// newer operation of the intent appeared after the one admission saw: the request is that
// one's duplicate, and admission looks again.
const ReasonSuperseded = "superseded"

func (l *Ledger) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}

// policy is the policy a new operation of in is opened with: the caller's own, else its
// registered kind's. A kind nobody registered has none to fall back on: guessing one could
// resend what must not be, or close as failed what needs a lookup first.
func (l *Ledger) policy(in Intent) (Policy, error) {
	if in.Policy != nil {
		return *in.Policy, nil
	}
	if i, ok := l.kinds[in.Kind]; ok {
		return l.specs[i].Policy, nil
	}
	return Policy{}, Errorf(EINVALID, "Operations of kind %s are not registered with this ledger, and the intent names no policy.", in.Kind)
}

// Get returns one operation or an ENOTFOUND error.
func (l *Ledger) Get(ctx context.Context, id string) (*Operation, error) { return l.store.Get(ctx, id) }

// Attempts lists an operation's attempts in order.
func (l *Ledger) Attempts(ctx context.Context, opID string) ([]Attempt, error) {
	return l.store.Attempts(ctx, opID)
}

// Answer records how a client request was answered (rule 8).
func (l *Ledger) Answer(ctx context.Context, clientRequestID int64, a Answer) error {
	return l.store.AnswerClientRequest(ctx, clientRequestID, a, l.Clock.Now())
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
	// Latest is set by admission, whatever the caller gave: the id of the newest operation
	// of this intent it saw ("" for none). The opening then creates nothing if a newer one
	// appeared meanwhile, and answers ECONFLICT with reason ReasonSuperseded: the request
	// is that one's duplicate.
	Latest *string

	// The request itself, and how admission answers it.

	// RequestRef is the client's own reference for this request (a tool call id).
	RequestRef string
	// Owner leases a new or resumed operation for the caller's sends.
	Owner string
	// Start is when the request arrived (default: now). An operation of the intent that
	// closed after it answers it: the request came while it was open.
	Start time.Time
	// ReplayFor is how long a succeeded operation of the intent answers new requests (an
	// Idempotency-Key's TTL); 0: only requests that arrived while it was open.
	ReplayFor time.Duration
	// HoldFailed is how long an operation that failed after an attempt the provider may
	// have run keeps answering the intent with its failure (a person closed it without a
	// lookup): a new operation could run it a second time.
	HoldFailed time.Duration
	// Check, when set, is asked before a new operation is opened (a refund must fit in
	// what is left of its payment); its error refuses the request.
	Check func(ctx context.Context) error
	// Policy is the policy a new operation is opened with (a tenant's own); nil takes its
	// kind's as registered with the ledger. It is stored on the operation, and everything
	// that later sends, reaps or closes it reads it from there, whatever the caller then asks.
	Policy *Policy
	// Holds is the operation the caller already belongs to (a job that opened or joined it
	// on an earlier pass): meeting it again records no new client request.
	Holds string
	// ReplayOnly admits the request only to a stored success of the intent, answered as a
	// replay: nothing is opened or sent for it. An intent with no succeeded operation
	// answers ENOTFOUND and records no client request, so the caller may ask again later.
	ReplayOnly bool
	// NeedsResult says only a kept result answers the request: a succeeded operation whose
	// bodies were purged answers no new request, which opens a new operation; the caller's
	// own (Holds) still replays.
	NeedsResult bool
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

// open opens the operation for an intent, or finds the open one, and records the client
// request. A new operation is committed leased to owner with its first attempt begun, so the
// caller may send at once. An existing one with another fingerprint is refused. Only
// admission opens operations: it decides first whether the request gets a new one.
func (l *Ledger) open(ctx context.Context, in Intent, requestRef, owner string) (Opened, error) {
	if err := in.validate(); err != nil {
		return Opened{}, err
	}
	pol, err := l.policy(in)
	if err != nil {
		return Opened{}, err
	}
	now := l.Clock.Now()
	id := NewOperationID()
	op := &Operation{
		ID: id, TenantID: in.TenantID, Kind: in.Kind, Provider: in.Provider,
		IntentKey: in.IntentKey, ProviderKey: ProviderKeyFor(id), Fingerprint: in.Fingerprint,
		OrderRef: in.OrderRef, CustomerRef: in.CustomerRef, ChatRef: in.ChatRef, PaymentRef: in.PaymentRef,
		AmountCents: in.AmountCents, Currency: in.Currency, Request: in.Request, Retention: in.Retention,
		Policy: pol,
	}
	p := OpenParams{Op: op, RequestRef: requestRef, Now: now, Actor: owner, Latest: in.Latest, API: l.Kind(in.Kind).CallOf(op).Label()}
	if owner != "" {
		p.Claim, p.LeaseUntil = owner, now.Add(l.Limits.Lease)
		if in.Retention > 0 {
			op.RetryUntil = ptr(now.Add(in.Retention - l.Limits.RetentionMargin))
		}
	}
	o, err := l.store.Open(ctx, p)
	if err != nil {
		return Opened{}, fmt.Errorf("open operation: %w", err)
	}
	if !o.Created && o.Op.Fingerprint != in.Fingerprint {
		if err := l.store.AnswerClientRequest(ctx, o.ClientRequestID, AnswerConflict, now); err != nil {
			return o, fmt.Errorf("answer client request: %w", err)
		}
		return o, Errorf(EINVALID, "This intent is already open as operation %s with other parameters.", o.Op.ID)
	}
	return o, nil
}

// joinOp records a client request for the intent of an operation already found, and
// returns the operation as it is now (it may have closed since it was found). Another
// fingerprint is refused as in open.
func (l *Ledger) joinOp(ctx context.Context, opID, fingerprint, requestRef string) (Opened, error) {
	now := l.Clock.Now()
	o, err := l.store.Join(ctx, opID, requestRef, now)
	if err != nil {
		return Opened{}, fmt.Errorf("join operation: %w", err)
	}
	if o.Op.Fingerprint != fingerprint {
		if err := l.store.AnswerClientRequest(ctx, o.ClientRequestID, AnswerConflict, now); err != nil {
			return o, fmt.Errorf("answer client request: %w", err)
		}
		return o, Errorf(EINVALID, "This intent is already open as operation %s with other parameters.", o.Op.ID)
	}
	return o, nil
}

// claim leases an existing operation to owner so it may send again, if it is claimable.
func (l *Ledger) claim(ctx context.Context, op *Operation, owner string) (*Operation, error) {
	now := l.Clock.Now()
	switch {
	case op.Status == StatusReceived, op.Stalled(now), op.Status == StatusInProgress && op.LeaseUntil == nil:
	case op.Leased(now):
		return nil, Errorf(ECONFLICT, "Operation %s is being sent by another request.", op.ID)
	default:
		return nil, Errorf(ECONFLICT, "Operation %s is %s and cannot be claimed.", op.ID, op.Status)
	}
	return l.store.Claim(ctx, ClaimParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now, LeaseUntil: now.Add(l.Limits.Lease)})
}

// beginAttempt checks that owner may send op now and records the attempt before the send.
func (l *Ledger) beginAttempt(ctx context.Context, op *Operation, owner string) (*Operation, *Attempt, error) {
	now := l.Clock.Now()
	if err := CheckSend(op, owner, now, l.Limits); err != nil {
		return nil, nil, err
	}
	var until *time.Time
	if op.RetryUntil == nil && op.Retention > 0 {
		until = ptr(now.Add(op.Retention - l.Limits.RetentionMargin))
	}
	return l.store.BeginAttempt(ctx, BeginParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now, MaxAttempts: l.Limits.AttemptsPerOperation, RetryUntil: until})
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

// finish records how attempt a of op ended and moves op where the rules say. The returned
// bool says whether the caller may send again in this call. Only the attempt loop (Run) and
// the takeover of a dead worker's attempt finish one: every attempt ends as its send did.
func (l *Ledger) finish(ctx context.Context, op *Operation, a *Attempt, owner string, r AttemptResult) (*Operation, bool, error) {
	if a == nil {
		return nil, false, Errorf(EINVALID, "There is no attempt of operation %s to finish.", op.ID)
	}
	if !r.Outcome.Valid() {
		return nil, false, Errorf(EINVALID, "Unknown attempt outcome %q.", r.Outcome)
	}
	if r.Outcome == OutcomeOK && (r.Result == nil || r.Result.ProviderRef == "") {
		return nil, false, Errorf(EINVALID, "A successful attempt needs the provider's record id.")
	}
	now := l.Clock.Now()
	next, retry := NextStatus(op, r.Outcome, op.Policy, now, l.Limits)
	if next == StatusFailed {
		var err error
		if next, err = l.refusedAfter(ctx, op, a); err != nil {
			return nil, false, err
		}
	}
	p := TransitionParams{
		ID: op.ID, Version: op.Version, From: op.Status, To: next, Now: now, Actor: owner, Owner: owner,
		Action: "attempt." + string(r.Outcome),
		Finish: &AttemptFinish{AttemptID: a.ID, StartedAt: a.StartedAt, Outcome: r.Outcome, HTTPStatus: r.HTTPStatus,
			ProviderRequestID: r.ProviderRequestID, ErrorCode: r.ErrorCode, FinishedAt: now,
			Usage: r.Usage, CostMicros: r.CostMicros, PossibleDuplicate: r.PossibleDuplicate},
		AnswerRequest: r.ClientRequestID, Answer: r.Answer, AnswerSince: op.CreatedAt,
	}
	if next == StatusInProgress {
		// Keep the lease for the next attempt of this call; the caller releases it when done.
		p.LeaseUntil = ptr(now.Add(l.Limits.Lease))
	}
	if r.Outcome == OutcomeOK {
		// The attempt's answer, recorded on the attempt with the provider's record id, is the
		// success's evidence (rule 9): a second row saying the same is not written, and the
		// store shows the attempt as the provider's response wherever evidence is read.
		p.Result = r.Result
	}
	if next.Final() || next == StatusUnknown || next == StatusExpired {
		p.Reason = "attempt " + string(r.Outcome)
	}
	out, err := l.transition(ctx, op, p)
	if err != nil {
		return nil, false, fmt.Errorf("finish attempt: %w", err)
	}
	return out, retry, nil
}

// release gives up owner's lease on an in-progress operation without changing its status,
// so a later call may claim it at once. Used when a call's attempt budget is spent.
func (l *Ledger) release(ctx context.Context, op *Operation, owner string, clientRequestID int64, a Answer) (*Operation, error) {
	now := l.Clock.Now()
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusInProgress,
		Now: now, Actor: owner, Owner: owner, Action: "release", AnswerRequest: clientRequestID, Answer: a,
		AnswerSince: op.CreatedAt})
}

// markUnknown stops all sending for op until someone closes it.
func (l *Ledger) markUnknown(ctx context.Context, op *Operation, actor, reason string) (*Operation, error) {
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusUnknown,
		Now: l.Clock.Now(), Actor: actor, Action: "mark_unknown", Reason: reason})
}

// expireRetention marks one operation past the provider's key retention as expired: from
// now on it is never sent again, and only a lookup or a person closes it.
func (l *Ledger) expireRetention(ctx context.Context, op *Operation, actor string) (*Operation, error) {
	return l.expire(ctx, op, actor, "", "past the provider's key retention")
}

// expire moves op to expired; owner, when set, is the lease holder giving it up (the
// reaper), else nobody may hold one.
func (l *Ledger) expire(ctx context.Context, op *Operation, actor, owner, reason string) (*Operation, error) {
	now := l.Clock.Now()
	if !op.PastRetention(now) {
		return nil, Errorf(EINVALID, "Operation %s is still within the provider's key retention.", op.ID)
	}
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusExpired,
		Now: now, Actor: actor, Owner: owner, Action: "expire", Reason: reason, RequireLeaseExpired: owner == ""})
}

// CloseParams is what a person or process gives to close an operation.
type CloseParams struct {
	ID       string
	Version  int64
	To       Status
	Evidence Evidence
	Actor    string
	// Result, for a close as succeeded, is the provider's answer to store on the operation
	// (a completion found at the provider), so the intent replays it; its ProviderRef must be
	// the evidence's. Nil stores only the evidence's record id.
	Result *Result
	// Approval, when set, is the open proposal this close carries out (rule 13); Actor is
	// then the person who proposed it.
	Approval *Approval
}

// Close closes an operation nobody is sending for, with evidence (rule 6). Two closers
// racing on one row: one wins, the other gets ECONFLICT naming the winner.
func (l *Ledger) Close(ctx context.Context, p CloseParams) (*Operation, error) {
	if strings.TrimSpace(p.Actor) == "" {
		return nil, Errorf(EINVALID, "Closing needs an actor.")
	}
	if a := p.Approval; a != nil && (a.ApprovedBy == "" || a.ApprovedBy == p.Actor || a.ProposedBy != p.Actor ||
		a.ProposerID == 0 || a.ApproverID == 0 || a.ProposerID == a.ApproverID) {
		return nil, &Error{Code: EFORBIDDEN, Reason: "self_approval", Message: "A proposed close is approved by a second person, never by the one who proposed it (rule 13)."}
	}
	op, err := l.store.Get(ctx, p.ID)
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
	if p.To == StatusFailed {
		attempts, err := l.store.Attempts(ctx, op.ID)
		if err != nil {
			return nil, fmt.Errorf("list attempts: %w", err)
		}
		if err := CheckFail(op, attempts, p.Evidence, op.Policy, now, l.Limits); err != nil {
			return nil, err
		}
	}
	ev := p.Evidence
	ev.RecordedBy, ev.RecordedAt = p.Actor, now
	res, err := closeResult(p.To, ev, p.Result)
	if err != nil {
		return nil, err
	}
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: p.Version, From: op.Status, To: p.To,
		Now: now, Actor: p.Actor, Action: "close", Reason: ev.Summary, Evidence: &ev, RequireLeaseExpired: true,
		Result: res, Approval: p.Approval})
}

// closeResult is what a close stores as the operation's result: the provider's answer when
// the closer has it, else only the record id of the evidence. An answer of another record
// than the evidence names is refused: the replay would not be what the provider did.
func closeResult(to Status, ev Evidence, given *Result) (*Result, error) {
	if to != StatusSucceeded {
		return nil, nil
	}
	if given != nil {
		if given.ProviderRef == "" || given.ProviderRef != ev.ProviderRef {
			return nil, Errorf(EINVALID, "The stored answer is of %q, not of the provider's record %q.", given.ProviderRef, ev.ProviderRef)
		}
		return given, nil
	}
	if ev.ProviderRef == "" {
		return nil, nil
	}
	return &Result{ProviderRef: ev.ProviderRef}, nil
}

// ExpireDue marks every open operation past its key retention as expired.
func (l *Ledger) ExpireDue(ctx context.Context, actor string) (int, error) {
	total := 0
	for {
		n, err := l.store.ExpireDue(ctx, actor, l.Clock.Now(), 500)
		total += n
		if err != nil || n < 500 {
			return total, err
		}
	}
}

func ptr[T any](v T) *T { return &v }

// giveUp settles an in-progress operation whose caller has no budget left (a job's
// attempts, deadline or cost): unknown if any attempt may have been executed, failed only
// when every attempt was refused before it could be (rule 11).
func (l *Ledger) giveUp(ctx context.Context, op *Operation, owner, reason string) (*Operation, error) {
	atts, err := l.store.Attempts(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	for _, a := range atts {
		if a.Uncertain() {
			return l.markUnknown(ctx, op, owner, "budget spent ("+reason+") after an uncertain attempt")
		}
	}
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusFailed,
		Now: l.Clock.Now(), Actor: owner, Owner: owner, Action: "budget_exhausted",
		Reason: "budget spent (" + reason + "); every attempt was refused before it was executed"})
}

// finishDangling takes over an operation claimed from a worker that died: its unfinished
// attempt, which may have reached the provider, is recorded as a timeout and the
// operation's policy decides (rule 5). retry says this owner may send again; uncertain that
// an attempt, any of them and not only the last, may have been executed, so a resend to a
// provider without keys is looked up first where it can be and is a possible duplicate.
func (l *Ledger) finishDangling(ctx context.Context, op *Operation, owner string) (_ *Operation, retry, uncertain bool, _ error) {
	atts, err := l.store.Attempts(ctx, op.ID)
	if err != nil {
		return nil, false, false, fmt.Errorf("list attempts: %w", err)
	}
	if len(atts) == 0 {
		return op, true, false, nil
	}
	last := atts[len(atts)-1]
	if last.FinishedAt != nil {
		// No attempt was in flight: the dead worker stopped between two attempts. A refusal
		// at the door after an uncertain attempt leaves that one uncertain.
		return op, true, Uncertain(atts), nil
	}
	cur, retry, err := l.finish(ctx, op, &last, owner, AttemptResult{Outcome: OutcomeTimeout, ErrorCode: ErrorLeaseExpired})
	if err != nil {
		return nil, false, false, fmt.Errorf("finish the dead worker's attempt: %w", err)
	}
	return cur, retry, true, nil
}

// transition is the one way an operation changes: the move must be allowed by the status
// rules, and the store applies it as a compare-and-set on status and version, with its
// attempt, evidence, audit and outbox rows in the same transaction (rule 6). op is the
// operation as the caller read it: its request goes with the change, so the store need not
// read it back.
func (l *Ledger) transition(ctx context.Context, op *Operation, p TransitionParams) (*Operation, error) {
	if err := CheckTransition(p.From, p.To); err != nil {
		return nil, err
	}
	p.Request = op.Request
	return l.store.Transition(ctx, p)
}
