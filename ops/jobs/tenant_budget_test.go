package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
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
	clock := ops.NewManualClock(time.Now())
	w := e.worker("w1", false)
	w.Budgets = llm.NewBudgets(e.db, llm.DefaultPrices(), clock, time.Second)
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET llm_budget_micros = 1 WHERE id = $1`, e.tenant); err != nil {
		t.Fatal(err)
	}
	first := e.submit(t, e.tenant, "within", docA, "v1")
	e.drain(t, w)
	if j := e.job(t, first.ID); j.Status != jobs.StatusPublished {
		t.Fatalf("the job within the budget is %s, want published", j.Status)
	}
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
