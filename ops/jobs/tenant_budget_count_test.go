package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/llm"
)

// TestAJobWaitingForItsTenantsBudgetCountsOnce holds the count operators learn a budget's
// stop from (settle_llm_budget_refused_total, caller="job"): a job refused for its tenant's
// spent budget counts once, when the worker decides to hold it back until midnight UTC, not
// once per poll of the workers while it waits; a resend held to the budget counts as well;
// and another tenant's job counts nothing.
// ops rule 8
func TestAJobWaitingForItsTenantsBudgetCountsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, clock := budgetedWorker(t, e)
	e.submit(t, e.tenant, "within", docA, "v1")
	e.drain(t, w)
	spendAll(t, e)
	clock.Advance(2 * time.Second)
	e.submit(t, e.tenant, "past", docB, "v1")
	// The workers poll on: the waiting job is not claimed again before the budget resets.
	for range 5 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	want := []llm.BudgetRefusal{{TenantID: e.tenant, Reason: llm.ReasonBudgetSpent, API: "chat_completions", Caller: llm.CallerJob, N: 1}}
	if got := w.Budgets.Refusals(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("budget refusals %+v, want %+v", got, want)
	}
}
