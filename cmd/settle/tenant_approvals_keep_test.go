package main

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// TestTenantApprovalsWithoutASettingChangesNothing defends ops rule 13: 'settle tenant
// approvals shop', typed to see the tenant's settings, set both back to the global ones and
// so dropped the tenant's four-eyes threshold without a word. With neither --min-cents nor
// --not-executed it is refused in one line with exit 2, and the tenant's settings and the
// audit log stay as they were.
func TestTenantApprovalsWithoutASettingChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, _ := shopDatabase(t, "agent")
	vars := map[string]string{"DATABASE_URL": url}
	if code, _, stderr := run(t, []string{"tenant", "approvals", "shop", "--min-cents", "2500", "--not-executed", "on"}, vars, ""); code != 0 {
		t.Fatalf("set: exit %d %s", code, stderr)
	}
	args := []string{"tenant", "approvals", "shop"}
	code, stdout, stderr := run(t, args, vars, "")
	refusedInOneLine(t, args, code, stdout, stderr, "--min-cents")
	shop, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.TenantApprovals(ctx, shop.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a == nil || a.MinOff || a.MinCents == nil || *a.MinCents != 2500 || a.NotExecuted == nil || !*a.NotExecuted {
		t.Errorf("after 'tenant approvals shop': settings %+v; want --min-cents 2500 and --not-executed on kept", a)
	}
	if n := auditCount(t, db, "tenant.approvals"); n != 1 {
		t.Errorf("%d audit rows of tenant approvals, want the 1 of the setting", n)
	}
}

// auditCount is the number of audit rows of action in db.
func auditCount(t *testing.T, db *pg.DB, action string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTenantApprovalsKeepsTheSettingNotGiven defends ops rule 13: 'tenant approvals shop
// --min-cents 5000', run to raise the threshold, also set --not-executed back to the global
// setting (off unless set), so closes as not executed of that tenant stopped needing a
// second person without anyone asking for it. A flag left out keeps the tenant's setting,
// the line printed says what the tenant has now, and the audit row records that.
func TestTenantApprovalsKeepsTheSettingNotGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, _ := shopDatabase(t, "agent")
	vars := map[string]string{"DATABASE_URL": url}
	shop, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	set := func(args ...string) (string, *ops.TenantApprovals) {
		t.Helper()
		code, stdout, stderr := run(t, append([]string{"tenant", "approvals", "shop"}, args...), vars, "")
		if code != 0 {
			t.Fatalf("tenant approvals shop %v: exit %d %s", args, code, stderr)
		}
		a, err := db.TenantApprovals(ctx, shop.ID)
		if err != nil || a == nil {
			t.Fatalf("read settings: %v %v", a, err)
		}
		return stdout, a
	}
	set("--min-cents", "2500", "--not-executed", "on")
	stdout, a := set("--min-cents", "5000")
	if a.MinCents == nil || *a.MinCents != 5000 || a.NotExecuted == nil || !*a.NotExecuted || !strings.Contains(stdout, "closes as not executed need approval: always") {
		t.Errorf("after --min-cents 5000: %+v, printed %q; want 5000 and --not-executed on kept, and said", a, stdout)
	}
	stdout, a = set("--not-executed", "off")
	if a.MinCents == nil || *a.MinCents != 5000 || a.NotExecuted == nil || *a.NotExecuted || !strings.Contains(stdout, "closes from 5000 cents") {
		t.Errorf("after --not-executed off: %+v, printed %q; want the threshold 5000 kept, and said", a, stdout)
	}
	var after string
	if err := db.Pool.QueryRow(ctx, `SELECT after::text FROM audit_log WHERE action = 'tenant.approvals' ORDER BY id DESC LIMIT 1`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(after, `"min_cents": 5000`) || !strings.Contains(after, `"not_executed": false`) {
		t.Errorf("last audit row records %s; want the tenant's settings after the change", after)
	}
}
