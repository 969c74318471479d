package ops

import (
	"context"
	"errors"
	"fmt"
)

// A provider that takes no idempotency key may have generated (and billed) an attempt whose
// answer was lost; sending again would generate a second time. Where the provider keeps what
// it generated (an LLM provider's stored completions), a flow asks it first (Hooks.LookFirst),
// and what it finds settles the operation instead of a send. The operation is then closed
// with the lookup as its evidence and no attempt of its own: the only attempt that billed
// is the earlier one, and every count of sends, answers and possible duplicates stays a
// count of what the provider was asked to do.

// ReasonNotLookedUp is the reason of the error that ends a run because an earlier attempt
// may have been executed and the provider's record of it could not be read: nothing is sent
// until it can be.
const ReasonNotLookedUp = "not_looked_up"

// Found is what a lookup at the provider found of an earlier attempt of an operation: the
// provider's record of what it did, which settles the operation as succeeded.
type Found struct {
	// Evidence is the lookup's record (kind lookup, the provider's record id, a summary).
	Evidence Evidence
	// Result is the answer to store, so the intent replays it; nil stores only the record id
	// (the provider did it, but its answer could not be read).
	Result *Result
}

// NotLookedUp is the error of a lookup before a resend that could not be made.
func NotLookedUp(op *Operation, cause error) error {
	return &Error{Code: EUNAVAILABLE, Reason: ReasonNotLookedUp, Err: cause,
		Message: fmt.Sprintf("An earlier attempt of operation %s may have been executed, and %s could not be asked what it did: nothing is sent again until it can be.", op.ID, op.Provider)}
}

// lookFirst asks the flow's lookup, before a send that follows an uncertain attempt, what
// the provider did. It reports whether the run is over: the operation settled by what was
// found, or released because the lookup failed (the error says why).
func (r *runner) lookFirst(op *Operation) (*Operation, bool, error) {
	found, err := r.spec.Hooks.LookFirst(r.bg, op)
	if err != nil {
		out, rerr := r.release(op)
		return out, true, errors.Join(err, rerr)
	}
	if found == nil {
		return op, false, nil
	}
	out, err := r.l.settleFound(r.bg, op, r.spec.Owner, found)
	if err != nil {
		if _, rerr := r.release(op); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return op, true, fmt.Errorf("settle operation %s from the lookup: %w", op.ID, err)
	}
	return out, true, nil
}

// settleFound closes op, whose lease owner holds, as succeeded with what a lookup found
// (rule 9: the provider's own record), in the same checked transition as every close
// (rule 6).
func (l *Ledger) settleFound(ctx context.Context, op *Operation, owner string, f *Found) (*Operation, error) {
	now := l.Clock.Now()
	ev := f.Evidence
	ev.RecordedBy, ev.RecordedAt = owner, now
	if !ev.Kind.FromProvider() || ev.ProviderRef == "" {
		return nil, Errorf(EINVALID, "A lookup settles an operation only with the provider's record id.")
	}
	res, err := closeResult(StatusSucceeded, ev, f.Result)
	if err != nil {
		return nil, err
	}
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: StatusSucceeded,
		Now: now, Actor: owner, Owner: owner, Action: "close", Reason: ev.Summary, Evidence: &ev, Result: res})
}
