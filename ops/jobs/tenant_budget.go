package jobs

import (
	"context"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// waitForBudget puts back a job whose generation was refused because its tenant's LLM spend
// of the day reached its budget: nothing was sent, the refusal was recorded as the tenant's
// refused request (ops rule 8), and the job is claimed again once the budget resets, with
// the refusal as its last error so the submitter sees why it waits.
func (r *run) waitForBudget(ctx context.Context, refusal error) error {
	p, _ := llm.ProblemOf(refusal)
	return r.requeue(ctx, p.RetryAfter, llm.ReasonBudgetSpent, ops.ErrorMessage(refusal))
}
