package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/web"
)

// The tenants page's store is the database's.
var _ web.TenantBudgets = (*pg.DB)(nil)

// postPage submits a form without following the redirect, and returns the status and the
// page it answered with.
func (e *dashEnv) postPage(t *testing.T, c *http.Client, path string, form url.Values) (int, string) {
	t.Helper()
	resp, err := c.PostForm(e.url+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, html.UnescapeString(string(b))
}

// llmBudget is the tenant's LLM budget as stored, "none" without one.
func (e *dashEnv) llmBudget(t *testing.T, tenant string) string {
	t.Helper()
	var s string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT coalesce(llm_budget_micros::text, 'none') FROM tenants WHERE name = $1`, tenant).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// budgetPath is the address of the budget form of the dashEnv's tenant.
func (e *dashEnv) budgetPath() string { return "/tenants/" + itoa(e.tenant.ID) + "/budget" }

// TestOnlyAdminsChangeATenantsBudget is the attack of a manager, who may read the tenants
// page, posting its budget form anyway: the post is refused 403 and changes nothing, neither
// the budget nor the audit log, and a manager's page offers no form. Support and on-call see
// no tenants page and no link to it; an admin's post sets the budget, audited under the
// admin's email with the action 'settle tenant budget' writes, and "off" removes it.
func TestOnlyAdminsChangeATenantsBudget(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	for role, want := range map[desk.Role]int{desk.RoleSupport: http.StatusForbidden, desk.RoleOncall: http.StatusForbidden} {
		c := e.signIn(t, string(role)+"@example.com", role)
		if code, _ := e.page(t, c, "/tenants"); code != want {
			t.Errorf("%s GET /tenants = %d, want %d", role, code, want)
		}
		if _, body := e.page(t, c, "/ops"); strings.Contains(body, `data-testid="nav-tenants"`) {
			t.Errorf("%s is offered a link to /tenants", role)
		}
		if code, _ := e.postPage(t, c, e.budgetPath(), url.Values{"budget": {"5"}}); code != http.StatusForbidden {
			t.Errorf("%s POST %s = %d, want 403", role, e.budgetPath(), code)
		}
	}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	code, body := e.page(t, manager, "/tenants")
	if code != http.StatusOK || !strings.Contains(body, `data-tenant="shop"`) || !strings.Contains(body, `data-testid="nav-tenants"`) {
		t.Fatalf("manager GET /tenants = %d, want the page with shop and its link\n%s", code, body)
	}
	if strings.Contains(body, `data-testid="tenant-budget-form"`) {
		t.Errorf("a manager is offered the budget form")
	}
	if code, _ := e.postPage(t, manager, e.budgetPath(), url.Values{"budget": {"5"}}); code != http.StatusForbidden {
		t.Errorf("manager POST %s = %d, want 403", e.budgetPath(), code)
	}
	if got, n := e.llmBudget(t, "shop"), e.auditCount(t, "tenant.llm_budget"); got != "none" || n != 0 {
		t.Fatalf("refused posts left the budget %s and %d audit rows, want none and 0", got, n)
	}
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	if _, body := e.page(t, admin, "/tenants"); !strings.Contains(body, `data-testid="tenant-budget-form"`) {
		t.Errorf("an admin is not offered the budget form")
	}
	resp := e.post(t, admin, e.budgetPath(), url.Values{"budget": {"12.50"}})
	if resp.StatusCode != http.StatusSeeOther || e.llmBudget(t, "shop") != "12500000" {
		t.Fatalf("admin POST 12.50 = %d, budget %s; want 303 and 12500000", resp.StatusCode, e.llmBudget(t, "shop"))
	}
	_, body = e.page(t, admin, "/tenants")
	mustContain(t, body, "Tenant shop has an LLM budget of 12.50 USD a UTC day", "12.50 USD")
	var actor, after string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT actor, after::text FROM audit_log WHERE action = 'tenant.llm_budget'`).Scan(&actor, &after); err != nil {
		t.Fatal(err)
	}
	if actor != "admin@example.com" || !strings.Contains(after, `"llm_budget_micros": 12500000`) {
		t.Errorf("audit row by %q with %s, want the admin and the new budget", actor, after)
	}
	if resp := e.post(t, admin, e.budgetPath(), url.Values{"budget": {"off"}}); resp.StatusCode != http.StatusSeeOther || e.llmBudget(t, "shop") != "none" {
		t.Errorf("admin POST off = %d, budget %s; want 303 and none", resp.StatusCode, e.llmBudget(t, "shop"))
	}
	if n := e.auditCount(t, "tenant.llm_budget"); n != 2 {
		t.Errorf("%d audit rows, want 2: the setting and the removal", n)
	}
}

// TestAMalformedBudgetChangesNothingAndSaysWhy: an admin's budget that is no amount above
// zero with at most six decimals, or is over a billion, is refused on the page with 422,
// the value typed kept in the tenant's field and the reason beside it, as the command line
// refuses it; the budget and the audit log are left as they were.
func TestAMalformedBudgetChangesNothingAndSaysWhy(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	if resp := e.post(t, admin, e.budgetPath(), url.Values{"budget": {"7"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin POST 7 = %d", resp.StatusCode)
	}
	for typed, why := range map[string]string{
		"-5":             "not an amount above zero",
		"0":              "not an amount above zero",
		"lots":           "not an amount above zero",
		"1e3":            "not an amount above zero",
		"1,50":           "not an amount above zero",
		"1.1234567":      "not an amount above zero",
		"":               "not an amount above zero",
		"OFF":            "not an amount above zero",
		"99999999999999": "over a billion",
		"1000000000.5":   "over a billion",
	} {
		code, body := e.postPage(t, admin, e.budgetPath(), url.Values{"budget": {typed}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "The budget was not changed") || !strings.Contains(body, why) ||
			!strings.Contains(body, `data-testid="tenant-budget-error"`) || !strings.Contains(body, `value="`+typed+`"`) {
			t.Errorf("budget %q = %d, want 422 saying %q beside the value typed\n%.2000s", typed, code, why, body)
		}
	}
	if got, n := e.llmBudget(t, "shop"), e.auditCount(t, "tenant.llm_budget"); got != "7000000" || n != 1 {
		t.Errorf("refused budgets left the budget %s and %d audit rows, want 7000000 and 1", got, n)
	}
}

// TestAForgedTenantIDChangesNothing: a budget posted for an id that names no tenant (made
// up, not a number, or of a tenant removed since the page was shown) is answered with a
// page saying there is no such tenant, and changes no tenant's budget and writes no audit row.
func TestAForgedTenantIDChangesNothing(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	gone := e.world.Tenant("gone")
	if code, body := e.page(t, admin, "/tenants"); code != http.StatusOK || !strings.Contains(body, `data-tenant="gone"`) {
		t.Fatalf("GET /tenants = %d, want the page with tenant gone", code)
	}
	if _, err := e.db.Pool.Exec(context.Background(), `DELETE FROM tenants WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{itoa(gone.ID), "999999", "0", "-1", "shop", itoa(e.tenant.ID) + "x", "99999999999999999999"} {
		code, body := e.postPage(t, admin, "/tenants/"+url.PathEscape(id)+"/budget", url.Values{"budget": {"5"}})
		if code != http.StatusNotFound || !strings.Contains(body, "no tenant") || !strings.Contains(body, "</html>") {
			t.Errorf("POST a budget for tenant %q = %d, want 404 on a page saying there is no such tenant\n%.1000s", id, code, body)
		}
	}
	if got, n := e.llmBudget(t, "shop"), e.auditCount(t, "tenant.llm_budget"); got != "none" || n != 0 {
		t.Errorf("forged ids left shop's budget %s and %d audit rows, want none and 0", got, n)
	}
}

// TestTheTenantsPageShowsTheSpendTheBudgetCheckSees: a manager reads on the tenants page
// what the gateway's budget check reads (ops rule 8 records each call it refuses): after
// an admin sets a tenant's budget there and its first call spends it, the call past it is
// refused naming the day's spend, and the page shows that same amount against the budget,
// the share used, and the tenant refused until midnight UTC; a tenant without a budget
// shows what its calls cost too, and is not capped.
func TestTheTenantsPageShowsTheSpendTheBudgetCheckSees(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank")
	e := &dashEnv{env: &env{db: w.tw.DB, url: w.url}}
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	shop := "/tenants/" + itoa(w.tenants["shop"].ID) + "/budget"
	setBudget := func(amount string) {
		t.Helper()
		if resp := e.post(t, admin, shop, url.Values{"budget": {amount}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin sets shop's budget to %s = %d", amount, resp.StatusCode)
		}
	}
	// A budget that pays for the first call's worst case, lowered below what it cost.
	setBudget("1")
	for tenant, key := range map[string]string{"shop": "shop-1", "bank": "bank-1"} {
		if _, err := budgetChat(w, tenant, key); err != nil {
			t.Fatalf("%s's first call: %v", tenant, err)
		}
		w.tw.WaitStatus(t, key, ops.StatusSucceeded, 10*time.Second)
	}
	setBudget("0.000001")
	w.clock.Advance(budgetRefresh + time.Second)
	_, err := budgetChat(w, "shop", "shop-2")
	status, refusal := refusedAnswer(err)
	m := regexp.MustCompile(`\(([0-9.]+ USD) so far today, UTC\)`).FindStringSubmatch(refusal)
	if status != http.StatusTooManyRequests || m == nil {
		t.Fatalf("shop's call past its budget: %d %s; want 429 naming the day's spend", status, refusal)
	}
	code, body := e.page(t, manager, "/tenants")
	if code != http.StatusOK {
		t.Fatalf("manager GET /tenants = %d", code)
	}
	body = html.UnescapeString(body)
	row := tenantRowOf(t, body, "shop")
	for _, want := range []string{`data-testid="tenant-spent">` + m[1] + `<`, `data-testid="tenant-budget">0.000001 USD<`,
		`data-testid="tenant-refused">refused until`, " %"} {
		if !strings.Contains(row, want) {
			t.Errorf("shop's row lacks %q, what the budget check read:\n%s", want, row)
		}
	}
	bank := tenantRowOf(t, body, "bank")
	var spent int64
	if err := w.tw.DB.Pool.QueryRow(context.Background(), `SELECT sum(cost_micros) FROM operations WHERE tenant_id = $1`, w.tenants["bank"].ID).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bank, `data-testid="tenant-spent">`+ops.FormatMicrosExact(spent, "usd")+`<`) || !strings.Contains(bank, "not capped") ||
		!strings.Contains(bank, `data-testid="tenant-budget">none<`) {
		t.Errorf("bank's row does not show its spend of %s without a budget:\n%s", ops.FormatMicrosExact(spent, "usd"), bank)
	}
	resets := w.clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format("2006-01-02 15:04 UTC")
	if !strings.Contains(body, "reset at "+resets) {
		t.Errorf("the page does not say the budgets reset at %s", resets)
	}
}

// tenantRowOf is the table row of tenant on the tenants page.
func tenantRowOf(t *testing.T, body, tenant string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-testid="tenant-row" data-tenant="` + tenant + `">.*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("no row of tenant %s on the page:\n%s", tenant, body)
	}
	return m
}
