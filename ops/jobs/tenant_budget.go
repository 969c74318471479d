package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// unpricedWait is how long a job of a budgeted tenant whose model the price table does not
// price waits before a worker looks again: what ends the wait (the model priced, the budget
// removed) is an operator's change, not the day's end.
const unpricedWait = 5 * time.Minute

// held says err is a refusal of the tenant's budget that holds the job back: its spend of
// the day reached the budget, what is left cannot pay for the generation's worst case, or
// can but not beside the tenant's calls in flight, or its model is not priced while it has
// one.
func held(err error) bool {
	r := ops.ErrorReason(err)
	return r == llm.ReasonBudgetSpent || r == llm.ReasonBudgetTooSmall || r == llm.ReasonBudgetHeld || r == llm.ReasonModelNotPriced
}

// waitForBudget puts back a job whose generation was refused by its tenant's LLM budget:
// nothing was sent, the refusal is recorded as the tenant's refused request (ops rule 8),
// and the job is claimed again once the budget resets, or after unpricedWait when its model
// is not priced (a tenant given a budget after it submitted the job; admission refuses such
// a job of a tenant that has one), with the refusal as its last error so the submitter sees
// why it waits. A job that waits past its deadline fails as any other. A refusal for a spent
// budget, or for what is left being too small for the generation, counts once in the
// budgets' refusals (by its reason) and in the ledger: the job is not claimed again before
// the budget resets, so the workers' polls meanwhile count nothing. A generation held back
// by the calls in flight (ReasonBudgetHeld) waits the refusal's seconds and counts in the
// ledger only: a burst of the tenant's jobs on a budget that pays for each is no stop.
// resent is the open generation whose resend was held back, "" when admission refused a new
// one: admission recorded that refusal, while a resumed generation's admission recorded no
// request (the job's own pass), so its hold is recorded here, naming the generation.
//
// A generation whose worst case (its body's bytes as input tokens, its profile's max_tokens
// as output) does not fit what is left of the day's budget waits for the budget to reset
// as well; one whose worst case is over the whole budget of a day fails at once with
// ReasonOverWholeBudget, since no day pays for it: its profile or its document must be
// smaller.
func (r *run) waitForBudget(ctx context.Context, refusal error, resent string) error {
	reason, wait := ops.ErrorReason(refusal), unpricedWait
	if resent != "" {
		// One write; a refusal the database could not take still holds the job back, and
		// RefuseAs logged why.
		_ = r.w.Ledger.RefuseAs(ctx, ops.RequestParams{TenantID: r.j.TenantID, OperationID: resent, Kind: ops.KindLLMJob,
			RequestRef: "job:" + r.j.ID, Answer: ops.AnswerRejected}, refusal)
	}
	switch {
	case errors.Is(refusal, llm.ErrOverWholeBudget):
		// The job's final error carries the reason submission refuses the same job with:
		// llm_budget_too_small, the budget's own reason, says "not today" to a reader of the job.
		// It counts under that reason too, once: the job fails and is not claimed again.
		r.w.Budgets.Refused(r.j.TenantID, ReasonOverWholeBudget, ops.Call{API: llm.ChatAPI()}.Label(), llm.CallerJob)
		return r.fail(ctx, ReasonOverWholeBudget, "This job's generation may cost more than your tenant's whole LLM budget of a day: "+
			"no day's budget pays for it, so waiting does not help and the job failed; nothing of it was sent. Submit it again with a "+
			"model profile of fewer max_tokens or a cheaper model, or a shorter document, or ask the operator to raise the tenant's budget. "+
			"The budget's check said: "+ops.ErrorMessage(refusal))
	case reason == llm.ReasonBudgetSpent, reason == llm.ReasonBudgetTooSmall, reason == llm.ReasonBudgetHeld:
		// Refused counts no held refusal.
		r.w.Budgets.Refused(r.j.TenantID, reason, ops.Call{API: llm.ChatAPI()}.Label(), llm.CallerJob)
		p, _ := llm.ProblemOf(refusal)
		wait = p.RetryAfter
	}
	return r.requeue(ctx, wait, reason, ops.ErrorMessage(refusal))
}

// size is what one send of body may ask of the tenant's budget at most (generationSize).
func (r *run) size(body []byte) llm.CallSize {
	return generationSize(r.catalog().Profiles[r.j.ModelProfile], body)
}

// model is the model the job's profile asks for.
func (r *run) model() string {
	return r.catalog().Profiles[r.j.ModelProfile].Model
}

// budgetBeforeSend holds attempt next to the tenant's budget unless it is first, the attempt
// of a new generation that admission checked. Every other send is paid work the provider
// does now, whenever its generation was opened: a generation whose attempts the provider
// refused, resumed by this worker or the next once the budget is spent, would otherwise be
// generated past it. A refused send is recorded as not sent and the generation stays open
// for the job (ops rule 11), which waits for the budget to reset, its hold recorded as the
// tenant's refused request (waitForBudget).
func (r *run) budgetBeforeSend(ctx context.Context, first, next *ops.Attempt) error {
	if first != nil && next.ID == first.ID {
		return nil
	}
	return r.w.Budgets.CheckModel(ctx, r.j.TenantID, r.model(), next.OperationID)
}
