package ops

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/settle-dev/settle/ops/reqlog"
)

// Sender performs one attempt at a provider with the operation's provider key. It must not
// touch the store: the ledger records the attempt before and after. While it runs it may
// report how far the attempt got with ReportPhase(ctx, …).
type Sender interface {
	Send(ctx context.Context, op *Operation, a *Attempt) AttemptResult
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, op *Operation, a *Attempt) AttemptResult

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, op *Operation, a *Attempt) AttemptResult {
	return f(ctx, op, a)
}

// Sleeper waits between attempts; tests replace it to move a manual clock instead.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext waits for d or until ctx ends.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Hooks let a flow take part in Run without a loop of its own. Every hook is optional.
type Hooks struct {
	// Spent, asked before each new attempt, names the caller's own budget that another send
	// would overrun (a job's attempts, deadline or cost), or "". A spent budget ends the run
	// with Ledger.giveUp.
	Spent func(now time.Time) string
	// BeforeSend runs once the attempt is recorded and before it is sent; possibleDup says
	// the send follows an uncertain attempt of a provider that takes no key. An error ends
	// the run: the attempt is recorded as not sent and the lease released.
	BeforeSend func(ctx context.Context, op *Operation, a *Attempt, possibleDup bool) error
	// AfterAttempt runs once the attempt's end is recorded, with the operation as it now is.
	AfterAttempt func(ctx context.Context, op *Operation, res AttemptResult) error
	// MayRetry, when set, is asked before another attempt of this call: false ends the call
	// (a stream that reached its client cannot be restarted under it).
	MayRetry func() bool
	// LookFirst, when set, is asked before any send that follows an attempt whose outcome is
	// uncertain at a provider that takes no key (NoProviderKey): what did the provider do?
	// What it found settles the operation with no send (Found); nil means the lookup shows
	// that nothing was generated, and the send goes on. An error ends the run with nothing
	// sent and the lease released; a provider that could not be asked is an error of reason
	// ReasonNotLookedUp (NotLookedUp).
	LookFirst func(ctx context.Context, op *Operation) (*Found, error)
}

// RunSpec says how Run sends one operation.
type RunSpec struct {
	// Owner holds the operation's lease for the run.
	Owner string
	// First is an attempt already begun (a new operation's first, Admission.Attempt), or nil.
	First *Attempt
	// Deadline, when set, bounds the run's attempts and backoff instead of ctx's deadline;
	// a flow whose sends outlive its client's request sets it with a context that is never
	// cancelled.
	Deadline time.Time
	// PossibleDuplicate says an attempt of the operation before this run may have been
	// executed (Admission.PossibleDuplicate). A run that resumes an operation of a provider
	// that takes no key reads its attempts itself when the caller does not say so.
	PossibleDuplicate bool
	// PhaseDelay is how long a phase lasts before it is written; a shorter attempt writes
	// none. Zero or less writes at once.
	PhaseDelay time.Duration
	Sleep      Sleeper
	Hooks      Hooks
}

// Run sends op until its outcome is settled or this call's budget is spent: at most
// Limits.AttemptsPerCall attempts, backoff with jitter between them honouring Retry-After,
// never past the deadline (rule 4). Every attempt is recorded before it is sent and after it
// ends; while it runs the lease is renewed and its phases written. When the call's budget
// runs out with the operation still open, the lease is released so the next call or the
// reaper may go on with the same key (rule 1). An outage of the database met after an
// attempt was sent is returned as MayHaveRun: the provider may have run it (rule 12).
func (l *Ledger) Run(ctx context.Context, op *Operation, s Sender, spec RunSpec) (*Operation, error) {
	r := &runner{l: l, ctx: ctx, sender: s, bg: context.WithoutCancel(ctx), spec: spec,
		pol: op.Policy, possibleDup: spec.PossibleDuplicate, uncertain: spec.PossibleDuplicate,
		rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))}
	if r.spec.Sleep == nil {
		r.spec.Sleep = SleepContext
	}
	if err := r.resumed(op); err != nil {
		out, rerr := r.release(op)
		return out, errors.Join(err, rerr)
	}
	out, err := r.run(op)
	if r.sent {
		err = MayHaveRun(err, fmt.Sprintf("Retrying with the same key goes on with operation %s from its record once its lease runs out.", op.ID))
	}
	return out, err
}

// runner is one call of Run.
type runner struct {
	l           *Ledger
	ctx, bg     context.Context
	sender      Sender
	spec        RunSpec
	pol         Policy
	possibleDup bool
	// uncertain says an attempt of the operation, before this run or in it, may have been
	// executed by a provider that takes no key, so every later send is looked up first.
	uncertain bool
	rnd       *rand.Rand
	// sent says an attempt of this run left for the provider.
	sent bool
}

func (r *runner) run(op *Operation) (*Operation, error) {
	a := r.spec.First
	for sends, waits := 0, 0; ; {
		var err error
		if a == nil && r.uncertain && r.spec.Hooks.LookFirst != nil {
			var over bool
			if op, over, err = r.lookFirst(op); over {
				return op, err
			}
		}
		if a == nil {
			if op, a, err = r.begin(op); err != nil || a == nil {
				return op, err
			}
		}
		var res AttemptResult
		if op, res, err = r.attempt(op, a); err != nil {
			return op, err
		}
		if op.Status != StatusInProgress {
			return op, nil
		}
		var wait time.Duration
		if res.Outcome == OutcomeKeyInUse {
			// The provider still runs an earlier send of this key: wait for it within the
			// deadline; this send counts against no budget.
			waits++
			wait = KeyInUseWait(waits, res.RetryAfter, r.l.Limits)
		} else {
			sends++
			// An uncertain attempt stays uncertain whatever later sends are told: a 429 or a
			// refusal at the door says nothing of what an earlier send generated, and a
			// lookup that found nothing may have asked before the provider stored it. So
			// every later send is looked up first and counted as a possible duplicate.
			r.uncertain = r.uncertain || (r.pol.NoProviderKey && res.Outcome.Uncertain())
			r.possibleDup = r.uncertain
			wait = Backoff(sends, res.RetryAfter, r.l.Limits, r.rnd)
			if sends >= r.l.Limits.AttemptsPerCall {
				return r.release(op)
			}
		}
		if r.left() < wait || (r.spec.Hooks.MayRetry != nil && !r.spec.Hooks.MayRetry()) {
			return r.release(op)
		}
		if err := r.spec.Sleep(r.ctx, wait); err != nil {
			return r.release(op)
		}
		a = nil
	}
}

// begin records a new attempt, unless the caller's deadline passed (an attempt now could
// not even be sent) or its budget is spent. A nil attempt ends the run.
func (r *runner) begin(op *Operation) (*Operation, *Attempt, error) {
	if r.ctx.Err() != nil || (!r.spec.Deadline.IsZero() && r.left() <= 0) {
		out, err := r.release(op)
		return out, nil, err
	}
	if r.spec.Hooks.Spent != nil {
		if reason := r.spec.Hooks.Spent(r.l.Clock.Now()); reason != "" {
			out, err := r.l.giveUp(r.bg, op, r.spec.Owner, reason)
			return out, nil, err
		}
	}
	cur, a, err := r.l.beginAttempt(r.bg, op, r.spec.Owner)
	if err != nil {
		if _, rerr := r.release(op); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return op, nil, fmt.Errorf("begin attempt: %w", err)
	}
	return cur, a, nil
}

// attempt sends a, already recorded, and records how it ended.
func (r *runner) attempt(op *Operation, a *Attempt) (*Operation, AttemptResult, error) {
	h := r.spec.Hooks
	if h.BeforeSend != nil {
		if err := h.BeforeSend(r.bg, op, a, r.possibleDup); err != nil {
			res := AttemptResult{Outcome: OutcomeNotSent, ErrorCode: ErrorReason(err)}
			if cur, _, ferr := r.l.finish(r.bg, op, a, r.spec.Owner, res); ferr == nil && cur.Status == StatusInProgress {
				_, _ = r.release(cur)
			}
			return op, res, err
		}
	}
	t := r.l.track(r.bg, op, r.spec.Owner, r.spec.PhaseDelay)
	r.sent = true
	res := r.sender.Send(withTracker(r.ctx, t), op, a)
	reqlog.Set(r.ctx, reqlog.ProviderRequestID, res.ProviderRequestID)
	op = t.stop()
	if r.pol.NoProviderKey {
		res.PossibleDuplicate = r.possibleDup
	}
	cur, _, err := r.l.finish(r.bg, op, a, r.spec.Owner, res)
	if err != nil {
		return op, res, fmt.Errorf("finish attempt: %w", err)
	}
	if h.AfterAttempt != nil {
		if err := h.AfterAttempt(r.bg, cur, res); err != nil {
			return cur, res, err
		}
	}
	return cur, res, nil
}

// left is the time the run has before its deadline; a run without one has plenty.
func (r *runner) left() time.Duration {
	if !r.spec.Deadline.IsZero() {
		return time.Until(r.spec.Deadline)
	}
	if dl, ok := r.ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return time.Duration(1<<63 - 1)
}

func (r *runner) release(op *Operation) (*Operation, error) {
	if op.Status != StatusInProgress || op.LeaseOwner != r.spec.Owner {
		return op, nil
	}
	out, err := r.l.release(r.bg, op, r.spec.Owner, 0, "")
	if err != nil {
		return op, fmt.Errorf("release lease: %w", err)
	}
	return out, nil
}
