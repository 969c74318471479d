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
