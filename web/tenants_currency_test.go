package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
)

// TestAYenBudgetIsShownInWholeYen: with a price table in yen, which has no minor unit, the
// tenants page shows a budget of 25 as 25 JPY (never 2500 JPY) and offers 25 in its form,
// and the 429 tenant_budget_spent refusal names the budget and the day's spend in yen as the
// page does; a budget of one micro-yen keeps its digits. ops rule 12: no answer says more
// than Settle knows, and an amount a hundred times too large does.
func TestAYenBudgetIsShownInWholeYen(t *testing.T) {
	t.Parallel()
	prices := llm.DefaultPrices()
	prices.Currency = "jpy"
	w := newPricedBudgetWorld(t, prices, "shop")
	e := &dashEnv{env: &env{db: w.tw.DB, url: w.url}}
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	shop := "/tenants/" + itoa(w.tenants["shop"].ID) + "/budget"
	if resp := e.post(t, admin, shop, url.Values{"budget": {"25"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin sets shop's budget to 25 = %d", resp.StatusCode)
	}
	_, body := e.page(t, admin, "/tenants")
	row := tenantRowOf(t, html.UnescapeString(body), "shop")
	if !strings.Contains(row, `data-testid="tenant-budget">25 JPY<`) || !strings.Contains(row, `value="25"`) {
		t.Errorf("shop's row does not show a budget of 25 JPY with 25 in its form:\n%s", row)
	}

	// The first call goes within 25 yen (a call is admitted only while its worst case fits
	// what is left); the budget is then lowered below what it cost.
	if _, err := budgetChat(w, "shop", "shop-1"); err != nil {
		t.Fatalf("shop's first call: %v", err)
	}
	w.tw.WaitStatus(t, "shop-1", ops.StatusSucceeded, 10*time.Second)
	if resp := e.post(t, admin, shop, url.Values{"budget": {"0.000001"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin sets shop's budget to one micro-yen = %d", resp.StatusCode)
	}
	w.clock.Advance(budgetRefresh + time.Second)
	_, err := budgetChat(w, "shop", "shop-2")
	status, refusal := refusedAnswer(err)
	m := regexp.MustCompile(`budget of 0\.000001 JPY a day is spent \(((?:[0-9]+|0\.[0-9]{6}) JPY) so far today, UTC\)`).FindStringSubmatch(refusal)
	if status != http.StatusTooManyRequests || m == nil {
		t.Fatalf("shop's call past its budget: %d %s; want 429 naming a budget of 0.000001 JPY and the spend in yen", status, refusal)
	}
	_, body = e.page(t, admin, "/tenants")
	row = tenantRowOf(t, html.UnescapeString(body), "shop")
	for _, want := range []string{`data-testid="tenant-budget">0.000001 JPY<`, `data-testid="tenant-spent">` + m[1] + `<`} {
		if !strings.Contains(row, want) {
			t.Errorf("shop's row lacks %q, what the refusal said:\n%s", want, row)
		}
	}
}
