package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTenantCommandsNameThePriceTablesCurrency: a budget is counted in the currency of the
// price table the servers cost calls with (SETTLE_LLM_PRICES), so 'settle tenant budget' and
// 'settle tenant list' read the same table and print that currency with every amount; an
// operator whose table is in euros never reads a bare "25/day" as dollars. A table the
// servers would refuse is refused here too, on one line with exit 2, and changes nothing.
// No answer names an amount without saying what it is counted in: ops rule 12.
func TestTenantCommandsNameThePriceTablesCurrency(t *testing.T) {
	t.Parallel()
	vars, db := tenantShop(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	eur := map[string]string{"DATABASE_URL": vars["DATABASE_URL"],
		"SETTLE_LLM_PRICES": write("eur.json", `{"currency": "EUR", "models": {"fake-small": {"input": 0.1, "output": 0.4}}}`)}

	code, stdout, stderr := run(t, []string{"tenant", "budget", "shop", "--budget", "25"}, eur, "")
	if code != 0 || !strings.Contains(stdout, "an LLM budget of 25.00 EUR a UTC day") {
		t.Fatalf("tenant budget in euros: exit %d, %q %q; want the budget as 25.00 EUR", code, stdout, stderr)
	}
	if code, stdout, stderr := run(t, []string{"tenant", "list"}, eur, ""); code != 0 || !strings.Contains(stdout, "25.00 EUR/day  0.00 EUR") {
		t.Fatalf("tenant list in euros: exit %d, %q\n%s", code, stderr, stdout)
	}
	// Without the variable the servers count in the built-in table's dollars, and so do these.
	if code, stdout, stderr := run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, "25.00 USD/day") {
		t.Fatalf("tenant list with the built-in table: exit %d, %q\n%s", code, stderr, stdout)
	}

	audits := auditCount(t, db, "tenant.llm_budget")
	for name, path := range map[string]string{
		"missing":       filepath.Join(dir, "none.json"),
		"not JSON":      write("broken.json", `{"currency": "EUR", "models": {`),
		"unknown field": write("typo.json", `{"currency": "EUR", "modles": {}}`),
		"negative":      write("negative.json", `{"currency": "EUR", "models": {"m": {"input": -1}}}`),
	} {
		bad := map[string]string{"DATABASE_URL": vars["DATABASE_URL"], "SETTLE_LLM_PRICES": path}
		for _, args := range [][]string{{"tenant", "budget", "shop", "--budget", "40"}, {"tenant", "list"}} {
			code, stdout, stderr := run(t, args, bad, "")
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "SETTLE_LLM_PRICES") {
				t.Errorf("%s table, settle %v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming SETTLE_LLM_PRICES",
					name, args, code, stdout, stderr)
			}
		}
	}
	var budget int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT llm_budget_micros FROM tenants WHERE name = 'shop'`).Scan(&budget); err != nil {
		t.Fatal(err)
	}
	if budget != 25_000_000 || auditCount(t, db, "tenant.llm_budget") != audits {
		t.Errorf("a refused price table changed the budget to %d micro-units or audited a change", budget)
	}
}

// TestTenantCommandsShowAYenBudgetInWholeYen: a price table in yen has no minor unit, so a
// budget of 25 is 25 JPY on the command line, as stored (25,000,000 micro-yen), never 2500
// JPY; a budget in fractions of a yen keeps its six decimals, as the budget's refusals show
// it. No answer says more than Settle knows: ops rule 12.
func TestTenantCommandsShowAYenBudgetInWholeYen(t *testing.T) {
	t.Parallel()
	vars, db := tenantShop(t)
	path := filepath.Join(t.TempDir(), "jpy.json")
	if err := os.WriteFile(path, []byte(`{"currency": "JPY", "models": {"fake-small": {"input": 15, "output": 60}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	jpy := map[string]string{"DATABASE_URL": vars["DATABASE_URL"], "SETTLE_LLM_PRICES": path}
	for _, c := range [][2]string{{"25", "25 JPY"}, {"0.5", "0.500000 JPY"}, {"1200.4", "1200.400000 JPY"}} {
		budget, want := c[0], c[1]
		code, stdout, stderr := run(t, []string{"tenant", "budget", "shop", "--budget", budget}, jpy, "")
		if code != 0 || !strings.Contains(stdout, "an LLM budget of "+want+" a UTC day") {
			t.Errorf("tenant budget --budget %s in yen: exit %d, %q %q; want the budget as %s", budget, code, stdout, stderr, want)
		}
		if code, stdout, stderr := run(t, []string{"tenant", "list"}, jpy, ""); code != 0 || !strings.Contains(stdout, want+"/day  0 JPY") {
			t.Errorf("tenant list after --budget %s in yen: exit %d, %q\n%s; want %s/day and a spend of 0 JPY", budget, code, stderr, stdout, want)
		}
	}
	var stored int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT llm_budget_micros FROM tenants WHERE name = 'shop'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 1_200_400_000 {
		t.Errorf("the budget 1200.4 is stored as %d micro-units, want 1200400000", stored)
	}
}
