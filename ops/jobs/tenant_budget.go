package jobs

import (
	"context"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// waitForBudget puts back a job whose generation was refused because its tenant's LLM spend
// of the day reached its budget: nothing was sent, the refusal was recorded as the tenant's
// refused request (ops rule 8), and the job is claimed again once the budget resets, with
// the refusal as its last error so the submitter sees why it waits. The refusal counts once
// in the budgets' refusals: the job is not claimed again before the budget resets, so the
// workers' polls meanwhile count nothing.
func (r *run) waitForBudget(ctx context.Context, refusal error) error {
	r.w.Budgets.Refused(r.j.TenantID, ops.Call{API: llm.ChatAPI()}.Label(), llm.CallerJob)
	p, _ := llm.ProblemOf(refusal)
	return r.requeue(ctx, p.RetryAfter, llm.ReasonBudgetSpent, ops.ErrorMessage(refusal))
}

// budgetBeforeSend holds attempt next to the tenant's budget unless it is first, the attempt
// of a new generation that admission checked. Every other send is paid work the provider
// does now, whenever its generation was opened: a generation whose attempts the provider
// refused, resumed by this worker or the next once the budget is spent, would otherwise be
// generated past it. A refused send is recorded as not sent and the generation stays open
// for the job (ops rule 11), which waits for the budget to reset.
func (r *run) budgetBeforeSend(ctx context.Context, first, next *ops.Attempt) error {
	if first != nil && next.ID == first.ID {
		return nil
	}
	return r.w.Budgets.CheckResend(ctx, r.j.TenantID, next.OperationID)
}
