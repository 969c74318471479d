package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
)

// TestAJobHeldForWhatIsLeftCountsOnceByItsReason holds the count operators learn a budget's
// stop from to the jobs held back because what is left of their tenant's budget cannot pay
// for their generation's worst case: such a tenant's pipeline is stopped as surely as by a
// spent budget, so the hold counts once in the budgets' refusals
// (settle_llm_budget_too_small_total, caller="job"), by its reason, not once per poll of the
// workers while the job waits for midnight.
// ops rule 8
func TestAJobHeldForWhatIsLeftCountsOnceByItsReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.svc.Catalog = capCatalog()
	w, clock := budgetedWorker(t, e)
	w.Catalog = capCatalog()
	submit := func(key, doc, profile string) {
		t.Helper()
		if _, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: key, Document: jobs.Document{Text: doc},
			Pipeline: "summarise", PromptVersion: "v1", ModelProfile: profile, LLMBudgetMicros: 102_000}); err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
	}
	// 0.102: the long job's worst case fits the whole budget, not what the mid job leaves.
	setBudget(t, e, 102_000)
	submit("mid", docA, "mid")
	e.drain(t, w)
	clock.Advance(2 * time.Second)
	submit("long", docB, "long")
	for range 5 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	want := llm.BudgetRefusal{TenantID: e.tenant, Reason: llm.ReasonBudgetTooSmall, API: "chat_completions", Caller: llm.CallerJob, N: 1}
	if got := w.Budgets.Refusals(); len(got) != 1 || got[0] != want {
		t.Errorf("budget refusals %+v, want %+v", got, want)
	}
}
