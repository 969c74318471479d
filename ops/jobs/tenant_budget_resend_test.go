package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// TestAJobHeldBackAtItsResendIsARefusedRequest is the attack of a tenant whose budget stops
// its jobs unseen: a job whose generation was sent once (the provider refused it, so it
// stays open) is resumed after the tenant's budget is spent, and its resend is held back.
// Nothing is sent, as for any held job, and the hold is recorded as the tenant's refused
// request with why, naming the generation (ops rule 8): once for the worker's decision, not
// once per poll of the workers while the job waits, as the budgets' counter counts it. The
// built-in TenantLLMBudgetSpent reads the ledger, so it fires for the tenant.
func TestAJobHeldBackAtItsResendIsARefusedRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, clock := budgetedWorker(t, e)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Times: 3})
	e.svc.MaxAttempts = 6
	parked := e.submit(t, e.tenant, "parked", docA, "v1")
	spend := e.submit(t, e.tenant, "spend", docB, "v1")
	for range 2 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	opID := e.job(t, parked.ID).OperationID
	if j := e.job(t, spend.ID); opID == "" || j.Status != jobs.StatusPublished {
		t.Fatalf("the parked job's generation %q, the job within the budget %s; want one and published", opID, j.Status)
	}
	spendAll(t, e)
	clock.Advance(2 * time.Second)
	// The workers poll on while the held job waits for the budget to reset.
	for range 4 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	if j := e.job(t, parked.ID); j.Status != jobs.StatusQueued || j.ErrorCode != llm.ReasonBudgetSpent {
		t.Fatalf("the job resumed past the budget is %s (%s), want queued with %s", j.Status, j.ErrorCode, llm.ReasonBudgetSpent)
	}
	if gens := e.generations(t); len(gens) != 1 {
		t.Errorf("generations %v, want only the one within the budget", gens)
	}
	// ops rule 8
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected'
		AND reason = $2 AND operation_id = $3 AND request_ref = $4`, e.tenant, llm.ReasonBudgetSpent, opID, "job:"+parked.ID); n != 1 {
		t.Errorf("%d refused requests recorded for the held resend of generation %s, want 1", n, opID)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, e.tenant); n != 1 {
		t.Errorf("%d refused requests of the tenant recorded in all, want 1", n)
	}
	as := alertstore.New(e.db)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: ops.NewManualClock(time.Now().Add(time.Second))}
	if _, err := ev.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := alertstest.BudgetStops(t, as); len(got) != 1 || !strings.Contains(got["pipeline"], "1 calls refused") {
		t.Errorf("TenantLLMBudgetSpent after the held resend: %v; want it firing for pipeline, counting 1", got)
	}
}
