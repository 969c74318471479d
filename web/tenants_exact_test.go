package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// TestTheTenantsPageShowsTheFiguresTheRefusalsShow is the attack of figures rounded to the
// cent on the tenants page while the budget's refusals show six decimals: a tenant that
// spent 0.0769 of a budget of 0.09 a day read "0.08 USD" spent and "0.01 USD left" (one
// that spent 0.0869 read "0.09 USD" of "0.09 USD", as if its budget were spent, while its
// calls that fit still went through). Through the real gateway, its calls that ask more
// than is left are refused naming what it spent and what is left with six decimals, and the
// page shows those same figures. ops rule 12: no answer says more
// than Settle knows.
func TestTheTenantsPageShowsTheFiguresTheRefusalsShow(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	ctx := context.Background()
	// What the tenant's calls of today cost, as the gateway's closes write it.
	if _, err := w.tw.DB.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
SELECT id, $1, 'llm_call', 'fakellm', id::text, id::text, 'fp', 0, '', 76900, '{"cost_micros": 76900}', 'succeeded', $2, $2, $2
FROM (SELECT gen_random_uuid() AS id) c`, w.tenants["shop"].ID, w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	w.budget(t, "shop", 90_000)
	var refusal string
	for i := range 3 {
		status, _, body := w.capPost(t, "shop", "/v1/chat/completions", "shop-big-"+strconv.Itoa(i), capChat(`"max_completion_tokens":100000`))
		if status != http.StatusTooManyRequests || !strings.Contains(body, reasonTooSmall) {
			t.Fatalf("shop's call past what is left: %d %.300s; want 429 %s", status, body, reasonTooSmall)
		}
		refusal = body
	}
	for _, want := range []string{"the 0.013100 USD left", "budget of 0.09 USD a day", "(0.076900 USD spent so far today"} {
		if !strings.Contains(refusal, want) {
			t.Fatalf("the refusal does not say %q: %s", want, refusal)
		}
	}
	w.clock.Advance(time.Second)
	e := &dashEnv{env: &env{db: w.tw.DB, url: w.url}}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	code, body := e.page(t, manager, "/tenants")
	if code != http.StatusOK {
		t.Fatalf("manager GET /tenants = %d", code)
	}
	row := tenantRowOf(t, html.UnescapeString(body), "shop")
	for _, want := range []string{`data-testid="tenant-spent">0.076900 USD<`, `data-testid="tenant-budget">0.09 USD<`, "0.013100 USD left", "85.4 %"} {
		if !strings.Contains(row, want) {
			t.Errorf("shop's row lacks %q, what its refusals say:\n%s", want, row)
		}
	}
	if regexp.MustCompile(`tenant-spent">0\.0[89] USD<|0\.01 USD left|tenant-refused`).MatchString(row) {
		t.Errorf("shop's row reads as spent, its figures rounded to the cent:\n%s", row)
	}
}
