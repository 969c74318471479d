package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/web"
)

// TestABudgetedTenantCannotSubmitAJobOfAModelTheTableDoesNotPrice is the attack of a tenant
// that spends past its LLM budget through the jobs API with a model profile whose model the
// price table does not price: the generations of such a job would cost nothing against the
// budget. As the gateway refuses such a call, POST /api/v1/jobs of a budgeted tenant answers
// 422 model_not_priced saying what to do, records no job and records the request as the
// tenant's refused request (ops rule 8); a tenant without a budget still submits it.
func TestABudgetedTenantCannotSubmitAJobOfAModelTheTableDoesNotPrice(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	svc := tw.Jobs()
	svc.Catalog = jobs.DefaultCatalog()
	svc.Catalog.Profiles["unpriced"] = jobs.Profile{Model: "fake-unpriced", MaxTokens: 32}
	s.JobsDeps = web.JobsDeps{Jobs: svc}
	shop, bank := tw.Tenant("shop"), tw.Tenant("bank")
	if _, err := tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = 1000000 WHERE id = $1`, shop.ID); err != nil {
		t.Fatal(err)
	}
	e := &jobsEnv{db: tw.DB, url: tw.Serve(s.Handler())}
	body := strings.Replace(jobJSON, `"fast"`, `"unpriced"`, 1)
	code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(shop, "shop"), "unpriced", body)
	msg, _ := out["detail"].(string)
	// ops rule 8
	if code != http.StatusUnprocessableEntity || out["code"] != llm.ReasonModelNotPriced || !strings.Contains(msg, "fake-unpriced") || !strings.Contains(msg, "SETTLE_LLM_PRICES") {
		t.Errorf("a budgeted tenant's job of an unpriced model: %d %v; want 422 %s naming the model and what to do", code, out, llm.ReasonModelNotPriced)
	}
	var jobsN, rejected int
	if err := tw.DB.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM jobs WHERE tenant_id = $1),
	(SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected')`, shop.ID).Scan(&jobsN, &rejected); err != nil {
		t.Fatal(err)
	}
	if jobsN != 0 || rejected != 1 {
		t.Errorf("after the refusal: %d jobs and %d refused requests recorded, want none and 1", jobsN, rejected)
	}
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(bank, "bank"), "unpriced", body); code != http.StatusAccepted {
		t.Errorf("a tenant without a budget submitting the unpriced profile: %d %v, want 202", code, out)
	}
}

// TestABudgetedTenantCannotSubmitAJobNoDayOfItsBudgetPays is the attack of a tenant whose
// job's one generation may cost more than its whole LLM budget of a day (10,000 tokens of
// gpt-4o, 0.10, against 0.09 a day): POST /api/v1/jobs answered 202 and the worker failed
// the job at once, so the client was told "accepted" for a job that can never run. It
// answers 422 over_whole_llm_budget, without Retry-After (waiting for midnight does not
// help, unlike the gateway's 429), its detail naming the worst case, the day's budget and
// the largest max_tokens that fits; no job is made, the request is recorded as the tenant's
// refused request (ops rule 8) and the same key is refused again. A tenant without a budget
// is not checked.
func TestABudgetedTenantCannotSubmitAJobNoDayOfItsBudgetPays(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	svc := tw.Jobs()
	svc.Catalog = jobs.DefaultCatalog()
	svc.Catalog.Profiles["long"] = jobs.Profile{Model: "gpt-4o", MaxTokens: 10_000}
	s.JobsDeps = web.JobsDeps{Jobs: svc}
	shop, bank := tw.Tenant("shop"), tw.Tenant("bank")
	if _, err := tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = 90000 WHERE id = $1`, shop.ID); err != nil {
		t.Fatal(err)
	}
	e := &jobsEnv{db: tw.DB, url: tw.Serve(s.Handler())}
	body := strings.Replace(jobJSON, `"fast"`, `"long"`, 1)
	for try := 1; try <= 2; try++ {
		code, out, h := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(shop, "shop"), "long", body)
		msg, _ := out["detail"].(string)
		// ops rule 12
		if code != http.StatusUnprocessableEntity || out["code"] != jobs.ReasonOverWholeBudget || h.Get("Retry-After") != "" ||
			!strings.Contains(msg, "up to 0.10 USD") || !strings.Contains(msg, "0.09 USD a day") || !strings.Contains(msg, "max_tokens of at most 89") {
			t.Errorf("submission %d of a job over the whole budget: %d %v (Retry-After %q); want 422 %s naming the worst case, the budget and what fits",
				try, code, out, h.Get("Retry-After"), jobs.ReasonOverWholeBudget)
		}
		var jobsN, rejected int
		if err := tw.DB.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM jobs WHERE tenant_id = $1),
		(SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected')`, shop.ID).Scan(&jobsN, &rejected); err != nil {
			t.Fatal(err)
		}
		// ops rule 8
		if jobsN != 0 || rejected != try {
			t.Errorf("after submission %d: %d jobs and %d refused requests recorded, want none and %d", try, jobsN, rejected, try)
		}
	}
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(bank, "bank"), "long", body); code != http.StatusAccepted {
		t.Errorf("a tenant without a budget submitting the long profile: %d %v, want 202", code, out)
	}
}
