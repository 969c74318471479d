package llm

import (
	"fmt"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Hold is a new call's worst case held against its tenant's leftover on this replica while
// the call runs (Budgets.admit), so that calls in flight together are never each given the
// same leftover. Its end is told once, on every path: Unsent when nothing of the call was
// sent, Ended with the operation as its run left it; a later end does nothing. The nil Hold
// of a tenant without a budget does nothing.
type Hold struct {
	s      *tenantSpend
	day    time.Time // the UTC day whose spend the call counts in
	micros int64
	done   bool // under s.mu
}

// Unsent ends h of a call of which nothing was sent (refused, answered from another
// operation, failed before its send): its worst case is free at once.
func (h *Hold) Unsent() { h.end(0) }

// Spent says the call's answer cost micros, all it will cost: h holds that rather than its
// worst case from now, so that the tenant's next call, which may come the moment the
// client has its answer, is not refused for what this one did not spend.
func (h *Hold) Spent(micros int64) {
	if h == nil {
		return
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !h.done {
		micros = max(micros, 0)
		s.held += micros - h.micros
		h.micros = micros
	}
}

// Ended ends h of a call whose run is over, op being its operation as the run left it (nil
// when the run could not tell): a closed operation's cost, written before the run ended,
// counts until the next read of the spend, which includes it. An operation still open (an
// unknown outcome: the provider may bill it yet) keeps the whole worst case counted until
// then.
func (h *Hold) Ended(op *ops.Operation) {
	if h == nil {
		return
	}
	cost := h.micros
	if op != nil && op.Status.Final() {
		cost = op.CostMicros
	}
	h.end(cost)
}

// end gives h back and counts cost as spent until the next read. A call of a day the entry
// no longer reads counts in that day's spend, not in the one read now.
func (h *Hold) end(cost int64) {
	if h == nil {
		return
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	s.held -= h.micros
	if s.day.Equal(h.day) {
		s.ended += max(cost, 0)
	}
}

// fitNew decides a new call of size s against what sp leaves, less what the tenant's calls
// in flight hold (fitCall: minCap, canSet); the fit it answers holds the worst case of the
// call as it will be sent. A call that would fit what is left but not beside the calls in
// flight is refused as held (heldRefusal), one that does not fit what is left at all as too
// small (tooSmall), name saying how its client sets its output cap.
func (b *Budgets) fitNew(s CallSize, sp spendNow, name capName, minCap int64, canSet bool) (fit, error) {
	left := sp.budget - sp.spent
	f := b.prices.fitCall(s, left-sp.held, minCap, canSet)
	if !f.refused {
		if f.setCap > 0 {
			f.hold = b.prices.worstWithCap(s, f.setCap)
		} else {
			f.hold, _ = b.prices.WorstCaseMicros(s)
		}
		return f, nil
	}
	if sp.held > 0 {
		if whole := b.prices.fitCall(s, left, minCap, canSet); whole.refused {
			f = whole
		} else {
			return f, b.heldRefusal(f, sp, name.said())
		}
	}
	return f, b.tooSmall(f, s, sp, name, minCap)
}

// heldRefusal is the refusal (ReasonBudgetHeld) of a call whose worst case f.worst fits
// what sp leaves but not beside what the tenant's calls in flight hold of it: the hold goes
// when they end, so Retry-After is the spend's refresh, not midnight. w says what is refused.
func (b *Budgets) heldRefusal(f fit, sp spendNow, w said) error {
	money := func(m int64) string { return ops.FormatMicrosExact(m, b.currency) }
	inFlight, again := w.held()
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonBudgetHeld, Err: &Problem{RetryAfter: b.refresh},
		Message: fmt.Sprintf("%s may cost up to %s; of the %s left of your tenant's LLM budget of %s a day "+
			"(%s spent so far today, UTC), %s is held by %s until they end, and the rest does not pay for it; %s %s",
			w.what(), money(f.worst), money(max(sp.budget-sp.spent, 0)), money(sp.budget), money(sp.spent), money(sp.held),
			inFlight, w.did, again)}
}

// admit is the ledger's admission of in, x.op the operation it found or opened. A request
// it opened no operation to send for gives back its budget hold at once: a replay, a key in
// flight, a refusal send no new call. A hold that no run takes (run) is given back when the
// request ends, whatever ended it.
func (x *exchange) admit(in ops.Intent) (ops.Admission, error) {
	adm, err := x.g.cfg.Ledger.Admit(x.ctx, in)
	x.op = adm.Op
	if err != nil || !adm.Created || adm.Verdict != ops.VerdictSend {
		x.budgetHold.Unsent()
	}
	return adm, err
}
