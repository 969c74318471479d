package ops

import (
	"context"
	"fmt"

	"github.com/settle-dev/settle/ops/reqlog"
)

// Verdict is what admission decided a client request gets.
type Verdict string

// The verdicts of Admit.
const (
	// VerdictSend: the caller holds the operation's lease and sends it with Run, either a
	// new operation (Admission.Attempt is its first attempt, begun) or one resumed with the
	// same key.
	VerdictSend Verdict = "send"
	// VerdictReplay: the operation is closed; its stored result (or failure) answers.
	VerdictReplay Verdict = "replay"
	// VerdictChecking: the outcome is unknown or the key expired; nothing is sent until a
	// lookup or a person closes it.
	VerdictChecking Verdict = "checking"
	// VerdictInFlight: another request holds the lease. Admission recorded the request as
	// answered in_progress; a caller that waits and answers otherwise records that answer.
	VerdictInFlight Verdict = "in_flight"
	// VerdictConflict: the intent is open with another fingerprint. It is an answer, not
	// a failure: Admit returns it without an error, recorded as a conflict, with the
	// operation that holds the intent.
	VerdictConflict Verdict = "conflict"
)

// Admission is what Admit decided, with the operation it concerns.
type Admission struct {
	Verdict         Verdict
	Op              *Operation
	Created         bool
	ClientRequestID int64
	// Attempt is the first attempt of a new operation, begun already (rule 1).
	Attempt *Attempt
	// PossibleDuplicate says an attempt of the resumed operation, any of them, may have
	// been executed by a provider that takes no key: a resend may execute twice.
	PossibleDuplicate bool
	// TookOver says a dead worker's unfinished attempt was recorded as a timeout on the
	// way: it may have been executed (and billed).
	TookOver bool
}

// Admit decides, in one place for every flow, what a client request for an intent gets:
// a new operation to send, an open one to resume with its key, a replay of a closed one,
// "checking" while nobody knows, 409 while another request sends, or a conflict when the
// same intent comes with other parameters. It records the client request and how it was
// answered (rule 8). An error means admission itself failed: every verdict, a conflict
// included, comes without one. A new operation is committed leased to
// in.Owner with its first attempt begun, guarded by the newest operation seen, so two
// concurrent requests make one operation (rule 2).
func (l *Ledger) Admit(ctx context.Context, in Intent) (Admission, error) {
	if err := in.validate(); err != nil {
		return Admission{}, err
	}
	if err := l.gateOpen(ctx, in); err != nil {
		return Admission{}, err
	}
	if in.Start.IsZero() {
		in.Start = l.Clock.Now()
	}
	if in.ReplayOnly {
		return l.replayOnly(ctx, in)
	}
	if in.Check == nil {
		// Most intents are new: try the insert first, guarded by "no operation yet", which
		// saves the lookup's round trip; an open one is joined in the same statement.
		none := ""
		first := in
		first.Latest = &none
		o, err := l.open(ctx, first, in.RequestRef, in.Owner)
		if ErrorReason(err) != ReasonSuperseded {
			return l.admitted(ctx, in, o, err)
		}
	}
	for range 4 {
		latest, err := l.store.LatestForIntent(ctx, in.TenantID, in.Kind, in.IntentKey)
		if err != nil && ErrorCode(err) != ENOTFOUND {
			return Admission{}, l.cut(ctx, in, err)
		}
		join := false
		if latest != nil {
			if join, err = l.joinable(ctx, in, latest); err != nil {
				return Admission{}, l.cut(ctx, in, err)
			}
		}
		if join {
			if latest.ID == in.Holds {
				// The caller's own operation from an earlier pass: no new client request.
				return l.dispatch(context.WithoutCancel(ctx), in, Admission{Op: latest})
			}
			return l.join(ctx, in, latest.ID)
		}
		seen := ""
		if latest != nil {
			seen = latest.ID
		}
		if in.Check != nil {
			if err := in.Check(ctx); err != nil {
				return l.refused(ctx, in, seen, err)
			}
		}
		in.Latest = &seen
		o, err := l.open(ctx, in, in.RequestRef, in.Owner)
		if ErrorReason(err) == ReasonSuperseded {
			continue // a concurrent request opened it first: look again
		}
		return l.admitted(ctx, in, o, err)
	}
	return Admission{}, fmt.Errorf("the intent %q kept changing during admission", in.IntentKey)
}

// cut answers a request whose admission failed on a read before it opened or joined
// anything. When the caller's deadline or cancel is what cut the read (a database slowed by
// load, a short client deadline), the request still reached the ledger, so it is recorded
// as refused, on a context of its own as every refusal is (rule 8); err stays the answer.
// Any other failure of a read is the database's: recording would meet it too.
func (l *Ledger) cut(ctx context.Context, in Intent, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if rerr := l.recordRefused(ctx, RequestParams{TenantID: in.TenantID, Kind: in.Kind, RequestRef: in.RequestRef, Answer: AnswerRejected}, err); rerr != nil {
		l.logger().ErrorContext(ctx, "record a request cut by its deadline", "kind", in.Kind, "err", rerr)
	}
	return err
}

// replayOnly admits a request that may only reuse the intent's stored success. The
// newest operation is the one that counts: an intent that succeeded opens no other while
// its replay window lasts.
func (l *Ledger) replayOnly(ctx context.Context, in Intent) (Admission, error) {
	latest, err := l.store.LatestForIntent(ctx, in.TenantID, in.Kind, in.IntentKey)
	if err != nil {
		return Admission{}, err
	}
	if latest.Status != StatusSucceeded || in.resultGone(latest) {
		return Admission{}, Errorf(ENOTFOUND, "The intent %q has no stored result to reuse.", in.IntentKey)
	}
	if latest.ID == in.Holds {
		// The caller's own operation from an earlier pass: no new client request.
		return Admission{Verdict: VerdictReplay, Op: latest}, nil
	}
	return l.join(ctx, in, latest.ID)
}

// joinable says whether a request for in is answered by latest, the intent's newest
// operation, rather than by a new one: while latest is open; when it closed after the
// request arrived (the request came while it was open: it is its duplicate); within the
// intent's replay window, when it succeeded or carries other parameters (to refuse); and
// while in.HoldFailed lasts, when it failed after an attempt the provider may have run,
// since a new operation could run it again (rule 11).
func (l *Ledger) joinable(ctx context.Context, in Intent, latest *Operation) (bool, error) {
	age := l.Clock.Now().Sub(latest.CreatedAt)
	switch {
	case !latest.Status.Final():
		return true, nil
	case in.resultGone(latest):
		return false, nil
	case latest.ClosedAt != nil && !latest.ClosedAt.Before(in.Start):
		return true, nil
	case in.ReplayFor > 0 && age < in.ReplayFor && (latest.Status == StatusSucceeded || latest.Fingerprint != in.Fingerprint):
		return true, nil
	case latest.Status != StatusFailed || age >= in.HoldFailed:
		return false, nil
	}
	atts, err := l.store.Attempts(ctx, latest.ID)
	if err != nil {
		return false, fmt.Errorf("list attempts: %w", err)
	}
	return Uncertain(atts), nil
}

// resultGone says latest succeeded but its result, which a NeedsResult request is answered
// from, was purged, and it is not the caller's own operation, which keeps its one charge
// (rule 3).
func (in Intent) resultGone(latest *Operation) bool {
	return in.NeedsResult && latest.Status == StatusSucceeded && latest.PurgedAt != nil && latest.ID != in.Holds
}

// refused answers a request whose Check refused a new operation. The refusal may be the
// intent's own doing: a concurrent request of it took what the check counts, or its
// earlier operation succeeded ("try again" after it went through). Then the answer is that
// operation, not the refusal.
func (l *Ledger) refused(ctx context.Context, in Intent, seen string, cause error) (Admission, error) {
	newer, err := l.store.LatestForIntent(ctx, in.TenantID, in.Kind, in.IntentKey)
	if err == nil && (newer.ID != seen || (newer.Status == StatusSucceeded && newer.Fingerprint == in.Fingerprint)) {
		return l.join(ctx, in, newer.ID)
	}
	if rerr := l.recordRefused(ctx, RequestParams{TenantID: in.TenantID, Kind: in.Kind, RequestRef: in.RequestRef, Answer: AnswerRejected}, cause); rerr != nil {
		return Admission{}, rerr
	}
	return Admission{}, cause
}

func (l *Ledger) join(ctx context.Context, in Intent, opID string) (Admission, error) {
	o, err := l.joinOp(ctx, opID, in.Fingerprint, in.RequestRef)
	return l.admitted(ctx, in, o, err)
}

// admitted turns what open or joinOp found into a verdict.
func (l *Ledger) admitted(ctx context.Context, in Intent, o Opened, err error) (Admission, error) {
	a := Admission{Op: o.Op, Created: o.Created, ClientRequestID: o.ClientRequestID, Attempt: o.Attempt}
	if o.Op != nil {
		reqlog.Set(ctx, reqlog.OperationID, o.Op.ID)
	}
	switch {
	case err != nil && ErrorCode(err) == EINVALID && o.Op != nil:
		// open and joinOp refuse another fingerprint, and record the request as a conflict.
		a.Verdict = VerdictConflict
		return a, nil
	case err != nil:
		return a, err
	case o.Created:
		a.Verdict = VerdictSend
		return a, nil
	}
	return l.dispatch(context.WithoutCancel(ctx), in, a)
}

// dispatch decides what a request that joined an existing operation gets, by its status.
func (l *Ledger) dispatch(ctx context.Context, in Intent, a Admission) (Admission, error) {
	op, now := a.Op, l.Clock.Now()
	reqlog.Set(ctx, reqlog.OperationID, op.ID)
	switch {
	case op.Status.Final():
		return l.answered(ctx, a, VerdictReplay, AnswerReplayed)
	case op.Status == StatusUnknown || op.Status == StatusExpired:
		return l.answered(ctx, a, VerdictChecking, AnswerChecking)
	case op.Leased(now):
		return l.answered(ctx, a, VerdictInFlight, AnswerInProgress)
	case op.PastRetention(now):
		// The provider may have forgotten the key: a resend could execute twice.
		exp, err := l.expireRetention(ctx, op, in.Owner)
		if err != nil {
			return a, err
		}
		a.Op = exp
		return l.answered(ctx, a, VerdictChecking, AnswerChecking)
	}
	return l.resume(ctx, in, a)
}

// resume takes over an open operation nobody holds (received, released by an earlier
// call, or stalled) to send it again with its key. A dead worker's unfinished attempt is
// recorded as a timeout first; an operation whose policy forbids resending after an
// uncertain attempt becomes unknown instead.
func (l *Ledger) resume(ctx context.Context, in Intent, a Admission) (Admission, error) {
	claimed, err := l.claim(ctx, a.Op, in.Owner)
	if ErrorCode(err) == ECONFLICT {
		// Another request claimed it a moment ago: it is in flight.
		cur, gerr := l.store.Get(ctx, a.Op.ID)
		if gerr != nil {
			return a, gerr
		}
		a.Op = cur
		return l.answered(ctx, a, VerdictInFlight, AnswerInProgress)
	}
	if err != nil {
		return a, err
	}
	pol := claimed.Policy
	op, _, uncertain, err := l.finishDangling(ctx, claimed, in.Owner)
	if err != nil {
		return a, err
	}
	a.TookOver = op.Version != claimed.Version
	if uncertain && !pol.RetryUncertain && op.Status == StatusInProgress {
		if op, err = l.markUnknown(ctx, op, in.Owner, "an attempt's outcome is uncertain and the policy forbids a resend"); err != nil {
			return a, err
		}
	}
	a.Op = op
	if op.Status != StatusInProgress {
		return l.dispatch(ctx, in, a)
	}
	a.PossibleDuplicate = uncertain && pol.NoProviderKey
	return l.answered(ctx, a, VerdictSend, AnswerRetried)
}

func (l *Ledger) answered(ctx context.Context, a Admission, v Verdict, ans Answer) (Admission, error) {
	a.Verdict = v
	if a.ClientRequestID == 0 {
		return a, nil // the caller's own operation: its request was answered before
	}
	if err := l.Answer(ctx, a.ClientRequestID, ans); err != nil {
		return a, fmt.Errorf("answer client request: %w", err)
	}
	return a, nil
}

// Readmit decides again, for a request already admitted, once its operation moved on: a
// request that waited on another one's send gets what the operation's status allows now.
func (l *Ledger) Readmit(ctx context.Context, in Intent, a Admission) (Admission, error) {
	if l.Gate != nil && l.Gate.Open() != nil {
		// Already recorded when it was first admitted: only refused now.
		return Admission{}, clockSkewRefusal(l.Gate.Open())
	}
	return l.dispatch(ctx, in, a)
}

// ReasonClockSkew is the reason of the EUNAVAILABLE a replica answers while its clock is
// too far off the database's to judge leases (SkewGuard).
const ReasonClockSkew = "clock_skew"

// gateOpen refuses, and records as refused (rule 8, through Refuse, so a refusal the
// database was down to record is answered as the outage), a request this replica may not
// admit now: to a replica whose clock is off, a live lease may look run out, and taking it
// over would send again what may be under way (rule 11).
func (l *Ledger) gateOpen(ctx context.Context, in Intent) error {
	if l.Gate == nil {
		return nil
	}
	shut := l.Gate.Open()
	if shut == nil {
		return nil
	}
	return l.Refuse(ctx, in.TenantID, in.Kind, in.RequestRef, clockSkewRefusal(shut))
}

func clockSkewRefusal(cause error) error {
	return &Error{Code: EUNAVAILABLE, Reason: ReasonClockSkew, Err: cause,
		Message: "This server's clock is off the database's, so it cannot judge who holds the operation; nothing was sent. Retry in a moment: another server, or this one once its clock is right, will answer."}
}
