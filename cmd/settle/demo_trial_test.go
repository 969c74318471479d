package main

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/internal/demo"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// TestDemoTrialTenantIsRefusedOnceItsBudgetIsSpent: the demo's trial tenant is made with a
// budget of a cent a UTC day, which its chat backend uses up within a few messages: a call
// is admitted only while its worst case fits what is left, beside the calls in flight, so
// the spend comes near the budget rather than past it, and the next calls are refused
// (llm_budget_too_small, or tenant_budget_spent once it is reached), each recorded as the
// tenant's refused request (ops rule 8), so /tenants shows it refused, /reconcile its
// refusals and /alerts the built-in TenantLLMBudgetSpent firing for it once most of its
// recent messages are refused, while the demo tenant is untouched.
func TestDemoTrialTenantIsRefusedOnceItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	f := fake.NewLLM(fake.LLMOptions{Seed: 1})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := slowServer(t, 10*time.Second, time.Minute, "SETTLE_LLM_BASE_URL", base, "SETTLE_LLM_API_KEY", "sk-test",
		"SETTLE_RECONCILE_INTERVAL", "off", "SETTLE_WORKERS", "0")
	ctx := context.Background()
	tn, token := shopToken(t, p)
	d := demo.NewTraffic(demo.Server{URL: p.URL(), DB: p.DB, Ledger: p.Ledger, Refunds: p.Refunds}, &demo.Fakes{}, tn, token, nil, testLogger(t))
	count := func(q string) int {
		t.Helper()
		var n int
		if err := p.DB.Pool.QueryRow(ctx, q, demo.TrialTenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refused := `SELECT count(*) FROM client_requests c JOIN tenants t ON t.id = c.tenant_id WHERE t.name = $1 AND c.answer = 'rejected'`
	n := 0
	for ; n < 200 && count(refused) == 0; n++ {
		if err := d.TrialMessage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if count(refused) == 0 {
		t.Fatalf("none of the trial tenant's %d messages was refused by its budget", n)
	}
	t.Logf("the trial tenant's budget refused its message %d", n)
	if n > 60 {
		t.Errorf("the trial tenant took %d messages to be refused; the demo sends one every few seconds and should show it refused within minutes", n)
	}
	// The too-small rule fires once most of the tenant's requests of the last 2 minutes are
	// refused: the demo's next messages, at one every few seconds, get there within minutes.
	var got map[string]string
	for more := 0; more <= 200; more++ {
		if more%10 == 0 {
			if got = budgetAlertsOf(t, p); got[demo.TrialTenant] != "" {
				break
			}
		}
		if err := d.TrialMessage(ctx, n+more); err != nil {
			t.Fatal(err)
		}
	}
	if got[demo.TrialTenant] == "" || got["shop"] != "" {
		t.Errorf("TenantLLMBudgetSpent on the demo's /alerts: %v; want it firing for %s alone", got, demo.TrialTenant)
	}
	var budget int64
	if err := p.DB.Pool.QueryRow(ctx, `SELECT coalesce(llm_budget_micros, 0) FROM tenants WHERE name = 'shop'`).Scan(&budget); err != nil || budget != 0 {
		t.Errorf("the trial's budget reached the other tenant: %d, %v", budget, err)
	}
}

// budgetAlertsOf runs a pass of the built-in rules, the demo's, over p's store a second from
// now, rather than waiting for the server's evaluator, and returns the summaries of the
// active TenantLLMBudgetSpent instances, by tenant, as /alerts lists them.
func budgetAlertsOf(t *testing.T, p *Program) map[string]string {
	t.Helper()
	ctx := context.Background()
	as := alertstore.New(p.DB)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: ops.NewManualClock(time.Now().Add(time.Second))}
	if _, err := ev.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	return alertstest.BudgetStops(t, as)
}
