package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/web"
)

// TestTheTenantsPageAnswersWhileTheSpendCannotBeRead: the page's read of the tenants' spend is
// bounded, so a day whose calls cannot be summed in time (here the operations table is held
// by another transaction, as a read of hundreds of thousands of calls holds the page) still
// gives the page, with every tenant and its budget, saying the spend was not read rather than
// a figure nobody read (ops rule 12), and that the budget check still applies.
func TestTheTenantsPageAnswersWhileTheSpendCannotBeRead(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET llm_budget_micros = 25000000 WHERE id = $1`, e.tenant.ID); err != nil {
		t.Fatal(err)
	}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	manager.Timeout = 20 * time.Second
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE operations IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := manager.Get(e.url + "/tenants")
	if err != nil {
		t.Fatalf("GET /tenants while the spend cannot be read: %v after %s", err, time.Since(start).Round(time.Millisecond))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := html.UnescapeString(string(b))
	row := tenantRowOf(t, body, "shop")
	if resp.StatusCode != http.StatusOK || !strings.Contains(row, "spend not read (too slow)") ||
		!strings.Contains(row, `data-testid="tenant-budget">25.00 USD<`) || strings.Contains(row, "within budget") {
		t.Errorf("GET /tenants = %d after %s; want the page with shop's budget and its spend not read:\n%s",
			resp.StatusCode, time.Since(start).Round(time.Millisecond), row)
	}
	if !strings.Contains(body, "the budget check still applies") {
		t.Errorf("the page does not say the budget check still applies:\n%s", body)
	}
}

// TestTheTenantsPageSaysABusyTenantsSpendIsAFloor: a tenant with more calls today than the
// page's bound is summed only that far, and its row says the figure is a floor of the day's
// (ops rule 12), with no share of the budget used and no "within budget": whether its calls
// are refused is the budget check's to say until the floor reaches the budget.
func TestTheTenantsPageSaysABusyTenantsSpendIsAFloor(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, _ *testworld.World) { s.SpendBound = ops.SpendBound{Calls: 3} })
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET llm_budget_micros = 25000000 WHERE id = $1`, e.tenant.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
SELECT id, $1, 'llm_call', 'fakellm', id::text, id::text, 'fp', 0, '', 1000, '{"cost_micros": 1000}', 'succeeded', $2, $2, $2
FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 5)) c`, e.tenant.ID, e.clock.Now().UTC().Truncate(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	code, body := e.page(t, manager, "/tenants")
	row := tenantRowOf(t, html.UnescapeString(body), "shop")
	want := "at least " + ops.FormatMicrosExact(4*1000, "usd") + " (more than 3 calls today, not summed further; the budget check still applies)"
	if code != http.StatusOK || !strings.Contains(row, want) || !strings.Contains(row, `data-testid="tenant-spend-unknown"`) ||
		strings.Contains(row, " %") || strings.Contains(row, "within budget") {
		t.Errorf("GET /tenants = %d; want shop's row to say %q, with no share used:\n%s", code, want, row)
	}
}
