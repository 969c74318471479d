package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/web"
)

// TestAJobNoDayOfItsBudgetPaysCountsInTheBudgetMetrics is the attack of a refusal nobody
// counts: a budgeted tenant's POST /api/v1/jobs refused with 422 over_whole_llm_budget was
// counted only in settle_client_requests_total by reason, so an operator watching the
// budgets' series missed a pipeline whose every job is refused at submission. Through the
// real submission path each such refusal, a retry of its key too, counts once in
// settle_llm_budget_over_whole_total by tenant, API and caller; its detail speaks of the
// job's generation, and the series of spent and too-small budgets count nothing of it.
// ops rule 8
func TestAJobNoDayOfItsBudgetPaysCountsInTheBudgetMetrics(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	svc := tw.Jobs()
	svc.Catalog = jobs.DefaultCatalog()
	svc.Catalog.Profiles["long"] = jobs.Profile{Model: "gpt-4o", MaxTokens: 10_000}
	svc.Budgets = llm.NewBudgets(tw.DB, llm.DefaultPrices(), ops.NewManualClock(time.Now()), 0)
	s.JobsDeps = web.JobsDeps{Jobs: svc}
	shop, bank := tw.Tenant("shop"), tw.Tenant("bank")
	if _, err := tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = 90000 WHERE id = $1`, shop.ID); err != nil {
		t.Fatal(err)
	}
	url := tw.Serve(s.Handler())
	e := &jobsEnv{db: tw.DB, url: url}
	body := strings.Replace(jobJSON, `"fast"`, `"long"`, 1)
	for range 2 {
		code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(shop, "shop"), "long", body)
		msg, _ := out["detail"].(string)
		if code != http.StatusUnprocessableEntity || out["code"] != jobs.ReasonOverWholeBudget || !strings.HasPrefix(msg, "This job's generation may cost up to ") {
			t.Fatalf("a job over the whole budget: %d %v; want 422 %s speaking of the job's generation", code, out, jobs.ReasonOverWholeBudget)
		}
	}
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tw.Token(bank, "bank"), "long", body); code != http.StatusAccepted {
		t.Fatalf("a tenant without a budget: %d %v, want 202", code, out)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "settle_llm_budget_") {
			got = append(got, line)
		}
	}
	want := []string{web.MetricBudgetOverWhole + `{api="chat_completions",caller="job",tenant="shop"} 2`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the budgets' series on /metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
