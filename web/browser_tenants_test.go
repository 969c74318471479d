package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/ops/desk"
)

// TestBrowserAnAdminSetsATenantsBudget: in a real browser an admin opens Tenants from the
// navigation, types a budget into a tenant's form and sees the row say it, within budget,
// with the same audit row 'settle tenant budget' writes; a negative amount is refused
// beside the field with the reason, the budget unchanged; Remove clears it.
func TestBrowserAnAdminSetsATenantsBudget(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	if _, err := accounts(e.db).CreateUser(context.Background(), "admin@example.com", password, desk.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	alloc := browser(t)
	tab := newSession(t, alloc)
	e.browserLogin(t, tab, "admin@example.com")
	row := `[data-testid="tenant-row"][data-tenant="shop"] `
	in := func(testid string) chromedp.CSS { return chromedp.CSS(row + `[data-testid="` + testid + `"]`) }
	cell := func(testid string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(tab, 20*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.Text(in(testid)))
		if err != nil {
			t.Fatalf("read shop's %s: %v", testid, err)
		}
		return strings.TrimSpace(s)
	}
	do(t, tab, "open Tenants", clickLoad(byID("nav-tenants")), chromedp.WaitVisible(byID("tenants-table")))
	if got := cell("tenant-budget"); got != "none" {
		t.Fatalf("shop's budget shows %q before any was set, want none", got)
	}
	do(t, tab, "set shop's budget to 20", chromedp.SetValue(in("tenant-budget-input"), "20"),
		clickLoad(in("tenant-budget-save")), chromedp.WaitVisible(byID("flash")))
	if got := textOf(t, tab, "flash"); !strings.Contains(got, "Tenant shop has an LLM budget of 20.00 USD a UTC day") {
		t.Errorf("flash after setting the budget: %q", got)
	}
	if budget, state := cell("tenant-budget"), cell("tenant-state"); budget != "20.00 USD" || state != "within budget" {
		t.Errorf("shop's row after setting 20: budget %q, state %q; want 20.00 USD within budget", budget, state)
	}
	if got := e.llmBudget(t, "shop"); got != "20000000" || e.auditCount(t, "tenant.llm_budget") != 1 {
		t.Fatalf("the form stored budget %s with %d audit rows, want 20000000 and 1", got, e.auditCount(t, "tenant.llm_budget"))
	}
	shot(t, tab, "tenants-budget-set")
	do(t, tab, "type a negative budget", chromedp.SetValue(in("tenant-budget-input"), "-3"),
		clickLoad(in("tenant-budget-save")), chromedp.WaitVisible(in("tenant-budget-error")))
	if got := cell("tenant-budget-error"); !strings.Contains(got, "not an amount above zero") {
		t.Errorf("the refusal of -3 says %q", got)
	}
	if got := cell("tenant-budget"); got != "20.00 USD" || e.llmBudget(t, "shop") != "20000000" {
		t.Errorf("a refused -3 left the budget %q (%s), want 20.00 USD", got, e.llmBudget(t, "shop"))
	}
	do(t, tab, "remove shop's budget", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		clickLoad(in("tenant-budget-remove")), chromedp.WaitVisible(byID("flash")))
	if got := cell("tenant-budget"); got != "none" || e.llmBudget(t, "shop") != "none" {
		t.Errorf("after Remove shop's budget shows %q (%s), want none", got, e.llmBudget(t, "shop"))
	}
}
