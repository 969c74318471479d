package main

import (
	"context"
	"strings"
	"testing"
)

// TestTenantBudgetCommand: 'settle tenant budget' stores a tenant's LLM budget per day, which
// the gateway enforces before any call is sent (ops rule 8 records each refusal), --budget off
// clears it, 'tenant list' shows it, and mistakes are one line with exit 2 (an unknown tenant
// exit 1) that change nothing.
func TestTenantBudgetCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars, db := tenantShop(t)
	budget := func() string {
		t.Helper()
		var s string
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(llm_budget_micros::text, 'none') FROM tenants WHERE name = 'shop'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	code, stdout, stderr := run(t, []string{"tenant", "budget", "shop", "--budget", "12.50"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "an LLM budget of 12.50 USD a UTC day") || budget() != "12500000" {
		t.Fatalf("set: exit %d %q %q, budget %s", code, stdout, stderr, budget())
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tenant", "budget", "shop", "--budget", "-5"}, 2, "not an amount above zero"},
		{[]string{"tenant", "budget", "shop", "--budget", "0"}, 2, "not an amount above zero"},
		{[]string{"tenant", "budget", "shop", "--budget", "lots"}, 2, "not an amount above zero"},
		{[]string{"tenant", "budget", "shop", "--budget", "1e3"}, 2, "not an amount above zero"},
		{[]string{"tenant", "budget", "shop", "--budget", "0.0000001"}, 2, "not an amount above zero"},
		{[]string{"tenant", "budget", "shop", "--budget", "99999999999999"}, 2, "over a billion"},
		{[]string{"tenant", "budget", "shop", "--budget", "1000000000.5"}, 2, "over a billion"},
		{[]string{"tenant", "budget", "shop", "--budget", "5", "--budget", "6"}, 2, "given twice"},
		{[]string{"tenant", "budget", "shop"}, 2, "give --budget"},
		{[]string{"tenant", "budget", "--budget", "5"}, 2, "name the tenant"},
		{[]string{"tenant", "budget", "shop", "extra", "--budget", "5"}, 2, "unexpected argument"},
		{[]string{"tenant", "budget", "nobody", "--budget", "5"}, 1, "No tenant nobody"},
	} {
		code, stdout, stderr := run(t, tc.args, vars, "")
		if code != tc.code || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("settle %v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if budget() != "12500000" {
		t.Fatalf("a refused command changed the budget to %s", budget())
	}
	if code, stdout, _ := run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, "12.50 USD/day") {
		t.Fatalf("tenant list: exit %d\n%s", code, stdout)
	}
	if code, stdout, stderr = run(t, []string{"tenant", "budget", "--budget", "off", "shop"}, vars, ""); code != 0 || budget() != "none" ||
		!strings.Contains(stdout, "no LLM budget") {
		t.Fatalf("off: exit %d %q %q, budget %s", code, stdout, stderr, budget())
	}
	if n := auditCount(t, db, "tenant.llm_budget"); n != 2 {
		t.Errorf("%d audit rows of the budget, want 2: the setting and the clearing", n)
	}
	if code, stdout, _ := run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, "off") {
		t.Fatalf("tenant list after off: exit %d\n%s", code, stdout)
	}
}
