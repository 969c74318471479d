package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// budgetAlerts are the summaries of the instances of TenantLLMBudgetSpent active in as, by
// tenant; each has severity warning.
func budgetAlerts(t *testing.T, as *alertstore.Store) map[string]string {
	t.Helper()
	ins := alertstest.Firing(t, as, alertstest.BudgetAlert)
	for _, in := range ins {
		if in.Labels["severity"] != "warning" {
			t.Errorf("TenantLLMBudgetSpent for %v has severity %q, want warning", in.Labels, in.Labels["severity"])
		}
	}
	return alertstest.SummariesByTenant(ins)
}

// TestTheBuiltInRulesAreToldOfASpentLLMBudget: a tenant whose LLM budget of the day is spent
// has its customers stopped until midnight UTC, and a deployment without Prometheus must
// hear of it from the built-in rules, which read the ledger. Through the real gateway, shop
// spends its budget, then a new call and the resend of a call it parked before are refused
// with 429 tenant_budget_spent; bank's call of a model the price table does not price is
// refused for another reason. Each refused request is recorded with why (ops rule 8), and
// TenantLLMBudgetSpent fires for shop alone, counting its two refusals; it keeps firing for
// 10 minutes after the refusals have left its 10-minute window, and then resolves.
func TestTheBuiltInRulesAreToldOfASpentLLMBudget(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank")
	w.budget(t, "shop", dollar)
	w.budget(t, "bank", 1_000_000)
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Times: 3})
	if _, err := budgetChat(w, "shop", "parked"); err == nil {
		t.Fatal("a call the provider refused three times was answered")
	}
	if _, err := budgetChat(w, "shop", "spend"); err != nil {
		t.Fatalf("the call within the budget: %v", err)
	}
	w.tw.WaitStatus(t, "spend", ops.StatusSucceeded, 10*time.Second)
	w.spendAll(t, "shop")
	w.clock.Advance(budgetRefresh + time.Second)
	for _, key := range []string{"past-the-budget", "parked"} {
		_, err := budgetChat(w, "shop", key)
		if status, body := refusedAnswer(err); status != http.StatusTooManyRequests || !strings.Contains(body, llm.ReasonBudgetSpent) {
			t.Fatalf("shop's call %s past its budget: %v; want 429 %s", key, err, llm.ReasonBudgetSpent)
		}
	}
	c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens["bank"]), option.WithMaxRetries(0))
	p := ask("where is order 4417?", 0)
	p.Model = "fake-unpriced"
	if _, err := c.Chat.Completions.New(context.Background(), p, keyed("unpriced")); err == nil {
		t.Fatal("bank's call of an unpriced model was answered")
	}
	for _, c := range []struct {
		tenant, reason string
		want           int
	}{{"shop", llm.ReasonBudgetSpent, 2}, {"bank", llm.ReasonModelNotPriced, 1}} {
		if n := w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected' AND reason = $2`,
			w.tenants[c.tenant].ID, c.reason); n != c.want {
			t.Errorf("%d requests of %s recorded as refused for %s, want %d", n, c.tenant, c.reason, c.want)
		}
	}

	as := alertstore.New(w.tw.DB)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: w.clock}
	pass := func() map[string]string {
		t.Helper()
		if _, err := ev.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		return budgetAlerts(t, as)
	}
	w.clock.Advance(time.Second)
	if got := pass(); len(got) != 1 || !strings.Contains(got["shop"], "shop's LLM budget of the day is spent: 2 calls refused") {
		t.Fatalf("TenantLLMBudgetSpent after shop's refusals: %v; want it firing for shop alone, counting 2 calls", got)
	}
	// A pass a minute, as the evaluator runs: the refusals leave the 10-minute window after
	// the pass of minute 9, and keep_firing_for holds the alert 10 minutes past that pass.
	for minute := 1; minute <= 19; minute++ {
		w.clock.Advance(time.Minute)
		got := pass()
		if minute < 19 && (len(got) != 1 || got["shop"] == "") {
			t.Fatalf("TenantLLMBudgetSpent %d minutes after the last refusal: %v; want it still firing for shop", minute, got)
		}
		if minute == 19 && len(got) != 0 {
			t.Fatalf("TenantLLMBudgetSpent 19 minutes after the last refusal: %v; want it resolved", got)
		}
	}
}
