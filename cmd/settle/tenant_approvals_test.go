package main

import (
	"context"
	"strings"
	"testing"
)

// TestTenantApprovalsCommand: 'settle tenant approvals' stores a tenant's threshold and its
// setting for closes as not executed, "default" follows the global ones again, and mistakes
// are one line with exit 2 (an unknown tenant exit 1) that change nothing.
func TestTenantApprovalsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars, db := tenantShop(t)
	settings := func() string {
		t.Helper()
		var s string
		if err := db.Pool.QueryRow(ctx, `SELECT a.min_mode || ':' || coalesce(a.min_cents::text, '-') || ':' || coalesce(a.not_executed::text, '-')
FROM tenant_approvals a JOIN tenants t ON t.id = a.tenant_id WHERE t.name = 'shop'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	code, stdout, stderr := run(t, []string{"tenant", "approvals", "shop", "--min-cents", "5000", "--not-executed", "on"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "closes from 5000 cents") || settings() != "set:5000:true" {
		t.Fatalf("set: exit %d %q %q", code, stdout, stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tenant", "approvals", "shop", "--min-cents", "-5"}, 2, "not a whole number"},
		{[]string{"tenant", "approvals", "shop", "--min-cents", "lots"}, 2, "not a whole number"},
		{[]string{"tenant", "approvals", "shop", "--not-executed", "maybe"}, 2, "not on, off or default"},
		{[]string{"tenant", "approvals", "--min-cents", "5"}, 2, "name the tenant"},
		{[]string{"tenant", "approvals", "shop", "extra"}, 2, "unexpected argument"},
		{[]string{"tenant", "approvals", "nobody", "--min-cents", "5"}, 1, "No tenant nobody"},
	} {
		code, stdout, stderr := run(t, tc.args, vars, "")
		if code != tc.code || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("settle %v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if settings() != "set:5000:true" {
		t.Fatalf("a refused command changed the settings to %s", settings())
	}
	if code, stdout, _ := run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, "min-cents=5000,not-executed=on") {
		t.Fatalf("tenant list: exit %d\n%s", code, stdout)
	}
	if code, _, stderr = run(t, []string{"tenant", "approvals", "--min-cents", "off", "--not-executed", "default", "shop"}, vars, ""); code != 0 || settings() != "off:-:-" {
		t.Fatalf("off: exit %d %q, settings %s", code, stderr, settings())
	}
	for _, env := range []map[string]string{{"SETTLE_APPROVAL_MIN_CENTS": "ten"}, {"SETTLE_APPROVAL_NOT_EXECUTED": "yes"}, {"SETTLE_APPROVAL_TTL": "10s"}} {
		env["DATABASE_URL"] = vars["DATABASE_URL"]
		if _, err := LoadConfig([]string{"serve"}, func(k string) string { return env[k] }, t.TempDir()); err == nil || !strings.Contains(err.Error(), "SETTLE_APPROVAL_") {
			t.Errorf("serve with %v: %v, want a configuration error", env, err)
		}
	}
}
