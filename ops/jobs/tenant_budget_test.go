package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
)

// TestAJobOfATenantPastItsLLMBudgetSendsNothing is the attack of a tenant running up the
// shared provider bill through the jobs API: once its LLM spend of the day reached its
// budget, a worker sends none of its new generations. The job waits, queued until the budget
// resets, with the refusal as its last error; the refusal is recorded as the tenant's refused
// request (ops rule 8); and another tenant's job is generated meanwhile.
func TestAJobOfATenantPastItsLLMBudgetSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, clock := budgetedWorker(t, e)
	first := e.submit(t, e.tenant, "within", docA, "v1")
	e.drain(t, w)
	if j := e.job(t, first.ID); j.Status != jobs.StatusPublished {
		t.Fatalf("the job within the budget is %s, want published", j.Status)
	}
	spendAll(t, e)
	clock.Advance(2 * time.Second)
	past := e.submit(t, e.tenant, "past", docB, "v1")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, past.ID)
	resets := clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if j.Status != jobs.StatusQueued || j.ErrorCode != llm.ReasonBudgetSpent || j.RunAfter.Before(resets.Add(-time.Minute)) {
		t.Errorf("the job past the budget is %s (%s) until %s; want queued with %s until about %s", j.Status, j.ErrorCode, j.RunAfter, llm.ReasonBudgetSpent, resets)
	}
	if gens := e.generations(t); len(gens) != 1 {
		t.Errorf("generations %v, want only the one within the budget", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected'`, e.tenant); n != 1 {
		t.Errorf("%d refused requests recorded, want 1", n)
	}
	other := e.submit(t, e.world.Tenant("other").ID, "other", docB, "v1")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if j := e.job(t, other.ID); j.Status != jobs.StatusPublished {
		t.Errorf("another tenant's job is %s, want published", j.Status)
	}
}

// TestAJobResumedPastItsTenantsBudgetSendsNothing is the attack of a tenant whose job was
// admitted within its budget and resumed after it was spent: the provider refused every
// attempt of its generation (nothing billed), the generation stays open, and a worker that
// takes the job again would have the provider generate it, a new paid call, past the budget.
// The resend is refused: nothing is sent, the job waits queued until the budget resets with
// the refusal as its last error, which does not say nothing was sent (ops rule 12), and the
// generation stays open for its key (ops rule 11).
func TestAJobResumedPastItsTenantsBudgetSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, clock := budgetedWorker(t, e)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Times: 3})
	// Room for more attempts than one run makes, so the job's own budget does not end it.
	e.svc.MaxAttempts = 6
	parked := e.submit(t, e.tenant, "parked", docA, "v1")
	spend := e.submit(t, e.tenant, "spend", docB, "v1")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, parked.ID)
	if j.Status != jobs.StatusQueued || j.OperationID == "" {
		t.Fatalf("the job the provider refused is %s with generation %q, want queued with one", j.Status, j.OperationID)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if j := e.job(t, spend.ID); j.Status != jobs.StatusPublished {
		t.Fatalf("the job within the budget is %s, want published", j.Status)
	}
	spendAll(t, e)
	clock.Advance(2 * time.Second)
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if gens := e.generations(t); len(gens) != 1 {
		t.Errorf("generations %v, want only the one within the budget", gens)
	}
	got := e.job(t, parked.ID)
	resets := clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if got.Status != jobs.StatusQueued || got.ErrorCode != llm.ReasonBudgetSpent || got.RunAfter.Before(resets.Add(-time.Minute)) {
		t.Errorf("the job resumed past the budget is %s (%s) until %s; want queued with %s until about %s", got.Status, got.ErrorCode, got.RunAfter, llm.ReasonBudgetSpent, resets)
	}
	if strings.Contains(got.ErrorMessage, "nothing of it was sent") || !strings.Contains(got.ErrorMessage, j.OperationID) {
		// Its earlier attempts were sent: the job's last error may not say nothing was
		// (ops rule 12), and names the generation that stays open.
		t.Errorf("the job's last error says more than Settle knows, or not which generation stays open: %s", got.ErrorMessage)
	}
	if op, err := e.db.Get(ctx, j.OperationID); err != nil || op.Status != ops.StatusInProgress {
		t.Errorf("the generation: %v, %v; want it open (in_progress)", op, err)
	}
}

// budgetedWorker is a worker of e whose tenant has a budget of a dollar a day, which pays
// for any one generation of these tests, its spend read on clock and trusted for a second.
func budgetedWorker(t *testing.T, e *env) (*jobs.Worker, *ops.ManualClock) {
	t.Helper()
	clock := ops.NewManualClock(time.Now())
	w := e.worker("w1", false)
	w.Budgets = llm.NewBudgets(e.db, llm.DefaultPrices(), clock, time.Second)
	setBudget(t, e, 1_000_000)
	return w, clock
}

// spendAll lowers e's tenant's budget to what its generations cost so far (at least a
// micro-dollar): its spend of the day reached its budget. A generation is admitted only
// while its worst case fits what is left, so none spends a budget whole.
func spendAll(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros =
		greatest((SELECT coalesce(sum(cost_micros), 0) FROM operations WHERE tenant_id = $1), 1) WHERE id = $1`, e.tenant); err != nil {
		t.Fatal(err)
	}
}

// unpricedCatalog is the default catalog with a profile "unpriced" whose model the built-in
// price table does not price.
func unpricedCatalog() *jobs.Catalog {
	c := jobs.DefaultCatalog()
	c.Profiles["unpriced"] = jobs.Profile{Model: "fake-unpriced", MaxTokens: 32}
	return c
}

// TestAQueuedJobOfAModelTheTableDoesNotPriceWaitsOnceItsTenantHasABudget is the attack of a
// job submitted before its tenant had a budget, of a model profile whose model the price
// table does not price: its generation would cost nothing against the budget, so the budget
// would not hold it. Once the tenant has a budget, the worker sends nothing for it: the job
// waits queued with model_not_priced as its last error, saying what to do, the refusal is
// recorded as the tenant's refused request, and another tenant's job of that profile runs.
func TestAQueuedJobOfAModelTheTableDoesNotPriceWaitsOnceItsTenantHasABudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.svc.Catalog = unpricedCatalog()
	submit := func(tenant int64, key string) *jobs.Job {
		s, err := e.svc.Submit(ctx, jobs.Submission{TenantID: tenant, IdempotencyKey: key,
			Document: jobs.Document{Text: docA}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "unpriced"})
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		return s.Job
	}
	queued := submit(e.tenant, "before-budget")
	w, _ := budgetedWorker(t, e)
	w.Catalog = unpricedCatalog()
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET llm_budget_micros = 1000000 WHERE id = $1`, e.tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, queued.ID)
	// ops rule 8
	if j.Status != jobs.StatusQueued || j.ErrorCode != llm.ReasonModelNotPriced || !strings.Contains(j.ErrorMessage, "SETTLE_LLM_PRICES") || !j.RunAfter.After(time.Now()) {
		t.Errorf("the queued job of an unpriced model is %s (%s: %s) until %s; want queued later with %s saying what to do", j.Status, j.ErrorCode, j.ErrorMessage, j.RunAfter, llm.ReasonModelNotPriced)
	}
	if gens := e.generations(t); len(gens) != 0 {
		t.Errorf("generations %v, want none for the budgeted tenant's unpriced model", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected'`, e.tenant); n != 1 {
		t.Errorf("%d refused requests recorded, want 1", n)
	}
	other := submit(e.world.Tenant("other").ID, "other")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if j := e.job(t, other.ID); j.Status != jobs.StatusPublished {
		t.Errorf("a tenant without a budget: its job of the unpriced model is %s, want published", j.Status)
	}
}
