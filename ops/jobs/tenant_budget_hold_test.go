package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// TestJobsInFlightHoldTheirTenantsLeftover is the attack of a tenant whose three jobs are
// claimed at once by the workers of one pool while the provider answers slowly: each
// generation's worst case (0.10 of output and its input) fits what is left on its own, two
// of them together do and three do not, and admitted each against the same spend all three
// would be sent. Two are sent; the third sends nothing and waits queued with
// llm_budget_held, its last error saying the leftover is held by calls and job generations
// in flight, to be claimed again within seconds rather than at midnight; a burst of jobs on a
// budget that pays for each is no stop, so the budgets count no refusal of what is left
// being too small (settle_llm_budget_too_small_total). Once the two ended their holds are
// gone: what is left is the budget less what they cost, counted once.
// ops rule 8
// ops rule 12
func TestJobsInFlightHoldTheirTenantsLeftover(t *testing.T) {
	t.Parallel()
	tw := testworld.New(t)
	fl, base := tw.LLM(fake.LLMOptions{Seed: 1, Latency: time.Second})
	up := tw.Upstream(base, openai.Config{APIKey: "sk-test", AttemptTimeout: 5 * time.Second})
	e := &env{world: tw, db: tw.DB, fake: fl, up: up, base: base, tenant: tw.Tenant("pipeline").ID, lease: 5 * time.Second, svc: tw.Jobs()}
	tw.ConsumeJobEvents()
	e.svc.Catalog = capCatalog()
	clock := ops.NewManualClock(time.Now())
	budgets := llm.NewBudgets(e.db, llm.DefaultPrices(), clock, time.Second)
	const budget = 250_000 // two generations' worst cases, not three
	setBudget(t, e, budget)
	var ws []*jobs.Worker
	for _, name := range []string{"w1", "w2", "w3"} {
		w := e.worker(name, false)
		w.Catalog, w.Budgets = capCatalog(), budgets
		ws = append(ws, w)
	}
	ctx := context.Background()
	for i, doc := range []string{docA, docB, docA + " Again."} {
		if _, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: "storm-" + string(rune('a'+i)),
			Document: jobs.Document{Text: doc}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "long"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if _, err := w.RunOnce(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(fl.Generations()); n != 2 {
		t.Errorf("%d generations sent for three jobs whose leftover pays for two, want 2", n)
	}
	held := e.count(t, `SELECT count(*) FROM jobs WHERE status = 'queued' AND error_code = $1
		AND error_message LIKE '%held by your tenant''s calls and job generations in flight%' AND run_after < now() + interval '10 seconds'`, llm.ReasonBudgetHeld)
	if held != 1 {
		t.Errorf("%d jobs wait for the calls in flight to end with %s, want 1", held, llm.ReasonBudgetHeld)
	}
	if got := budgets.Refusals(); len(got) != 0 {
		t.Errorf("the budgets count the job held back by the calls in flight as refused: %+v; want nothing", got)
	}
	// No read of the spend since the storm: the two count what their closes wrote, once, and
	// hold nothing more.
	var spent int64
	if err := e.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(cost_micros), 0) FROM operations WHERE tenant_id = $1`, e.tenant).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	left := (budget - spent) * 2 / 5 // gpt-4o's input tokens at 2.5 micro-dollars each
	for _, c := range []struct {
		in   int64
		fits bool
	}{{left, true}, {left + 1, false}} {
		h, err := budgets.CheckCall(ctx, e.tenant, llm.CallSize{Model: "gpt-4o", InputTokens: c.in, NoOutput: true}, "max_tokens")
		if (err == nil) != c.fits || (err != nil && !strings.Contains(ops.ErrorMessage(err), "more than the")) {
			t.Errorf("after the jobs ended, a call of %d input tokens with %d micro-dollars spent: %v; want admitted %v", c.in, spent, err, c.fits)
		}
		h.Unsent()
	}
}
