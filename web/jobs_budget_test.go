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
			!strings.Contains(msg, "up to 0.100663 USD") || !strings.Contains(msg, "0.09 USD a day") || !strings.Contains(msg, "max_tokens of at most 89") {
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

// TestAJobMadeBeforeItsTenantGotABudgetIsAnsweredByItsKey is the attack of a client that
// submitted a job of an unpriced model (202) before its tenant was given an LLM budget, and
// then retries the same request with the same key, as a careless client or a network retry
// does: it was told 422 model_not_priced, "recorded as refused, no job was made", though its
// job exists and may be running. The key answers its job as any repeat is answered (200,
// Idempotent-Replayed, the job counted as repeated, nothing recorded as refused); the same
// key with another body is still refused as a reused key, and a new key is still refused as
// model_not_priced, each recorded as the tenant's refused request (ops rule 8).
// ops rule 12
func TestAJobMadeBeforeItsTenantGotABudgetIsAnsweredByItsKey(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	svc := tw.Jobs()
	svc.Catalog = jobs.DefaultCatalog()
	svc.Catalog.Profiles["unpriced"] = jobs.Profile{Model: "fake-unpriced", MaxTokens: 32}
	s.JobsDeps = web.JobsDeps{Jobs: svc}
	shop := tw.Tenant("shop")
	e := &jobsEnv{db: tw.DB, url: tw.Serve(s.Handler())}
	token := tw.Token(shop, "shop")
	body := strings.Replace(jobJSON, `"fast"`, `"unpriced"`, 1)
	code, first, _ := e.do(t, http.MethodPost, "/api/v1/jobs", token, "before", body)
	if code != http.StatusAccepted {
		t.Fatalf("the job before the budget: %d %v, want 202", code, first)
	}
	if _, err := tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = 1000000 WHERE id = $1`, shop.ID); err != nil {
		t.Fatal(err)
	}
	counts := func() (jobsN, repeats, rejected int) {
		t.Helper()
		if err := tw.DB.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM jobs WHERE tenant_id = $1),
		(SELECT coalesce(sum(duplicate_posts), 0) FROM jobs WHERE tenant_id = $1),
		(SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected')`, shop.ID).Scan(&jobsN, &repeats, &rejected); err != nil {
			t.Fatal(err)
		}
		return jobsN, repeats, rejected
	}
	code, again, h := e.do(t, http.MethodPost, "/api/v1/jobs", token, "before", body)
	// ops rule 12
	if code != http.StatusOK || again["job_id"] != first["job_id"] || h.Get("Idempotent-Replayed") != "true" {
		t.Errorf("its key after the tenant got a budget: %d %v (Idempotent-Replayed %q); want 200 with job %v", code, again, h.Get("Idempotent-Replayed"), first["job_id"])
	}
	if n, reps, rej := counts(); n != 1 || reps != 1 || rej != 0 {
		t.Errorf("after the repeat: %d jobs, %d repeats, %d refused requests; want 1, 1 and none", n, reps, rej)
	}
	other := strings.Replace(body, "damaged", "late", 1)
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", token, "before", other); code != http.StatusUnprocessableEntity || out["code"] != jobs.ReasonKeyReused {
		t.Errorf("its key with another body: %d %v, want 422 %s", code, out, jobs.ReasonKeyReused)
	}
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", token, "after", body); code != http.StatusUnprocessableEntity || out["code"] != llm.ReasonModelNotPriced {
		t.Errorf("a new key: %d %v, want 422 %s", code, out, llm.ReasonModelNotPriced)
	}
	// ops rule 8
	if n, reps, rej := counts(); n != 1 || reps != 1 || rej != 2 {
		t.Errorf("after the two refusals: %d jobs, %d repeats, %d refused requests; want 1, 1 and 2", n, reps, rej)
	}
}
