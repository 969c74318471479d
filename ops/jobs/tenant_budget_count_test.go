package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
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

// TestAJobNoDayOfItsBudgetPaysIsCounted is the attack of a refusal nobody counts: a job
// whose generation may cost more than its tenant's whole LLM budget of a day is failed by
// the worker (its budget lowered after it was submitted) or refused at submission, both
// with over_whole_llm_budget, and neither counted in the budgets' refusals operators watch.
// Each counts once under its reason, caller "job", the API a job's generation calls.
// ops rule 8
func TestAJobNoDayOfItsBudgetPaysIsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.svc.Catalog = capCatalog()
	w, clock := budgetedWorker(t, e)
	w.Catalog = capCatalog()
	setBudget(t, e, 102_000)
	if _, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: "over", Document: jobs.Document{Text: docA},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "long", LLMBudgetMicros: 102_000}); err != nil {
		t.Fatal(err)
	}
	setBudget(t, e, 90_000)
	clock.Advance(2 * time.Second)
	for range 3 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	want := llm.BudgetRefusal{TenantID: e.tenant, Reason: jobs.ReasonOverWholeBudget, API: "chat_completions", Caller: llm.CallerJob, N: 1}
	if got := w.Budgets.Refusals(); len(got) != 1 || got[0] != want {
		t.Errorf("budget refusals after the worker failed the job: %+v, want %+v", got, want)
	}
	// Submission refuses the same job, counted in the budgets the process's workers share;
	// a job its key already names is answered, not refused, and counts nothing.
	e.svc.Budgets = w.Budgets
	for _, key := range []string{"again", "over"} {
		_, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: key, Document: jobs.Document{Text: docA},
			Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "long", LLMBudgetMicros: 90_000})
		if (key == "again") != (ops.ErrorReason(err) == jobs.ReasonOverWholeBudget) {
			t.Fatalf("submit %s over the whole budget: %v", key, err)
		}
	}
	want.N = 2
	if got := w.Budgets.Refusals(); len(got) != 1 || got[0] != want {
		t.Errorf("budget refusals after a submission was refused: %+v, want %+v", got, want)
	}
}
