package retainstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/retain"
)

// Charges the provider made that no operation explains are history like the rest: past the
// retention they go, with their exception once it was resolved before the cutoff and that
// exception's audit rows. One an open exception still names, one whose exception was
// resolved lately, and a recent one stay.
func TestRetentionRemovesOldOrphanChargesAndKeepsThoseStillNamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := retainNow.Add(-500 * 24 * time.Hour)
	recent := retainNow.Add(-10 * 24 * time.Hour)
	charge := func(ref string, at time.Time) {
		t.Helper()
		if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, amount_cents,
			currency, status, charged_at, seen_at) VALUES ($1, 'stripe', $2, 900, 'usd', 'succeeded', $3, $3)`, f.Tenant, ref, at); err != nil {
			t.Fatal(err)
		}
	}
	exception := func(ref, status string, resolved *time.Time) {
		t.Helper()
		var id int64
		if err := f.DB.Pool.QueryRow(ctx, `INSERT INTO recon_exceptions (kind, provider, ref, charge_refs, severity, summary,
			status, first_seen_at, last_seen_at, updated_at, resolved_at)
			VALUES ('orphan_charge', 'stripe', $1, ARRAY[$1], 'high', 's', $2, $3, $3, $3, $4) RETURNING id`,
			ref, status, old, resolved).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id)
			VALUES ($1, 'oncall', 'exception.resolve', 'recon_exception', $2::bigint::text)`, old, id); err != nil {
			t.Fatal(err)
		}
	}
	oldResolve, lateResolve := old.Add(time.Hour), retainNow.Add(-5*24*time.Hour)
	charge("re_orphan_plain", old)
	charge("re_orphan_settled", old)
	exception("re_orphan_settled", "resolved", &oldResolve)
	charge("re_orphan_open", old)
	exception("re_orphan_open", "open", nil)
	charge("re_orphan_late", old)
	exception("re_orphan_late", "resolved", &lateResolve)
	charge("re_orphan_recent", recent)

	// A dry run counts what the pass below removes, and removes nothing.
	dry, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if o := dry.Orphans; o.Charges != 2 || o.Exceptions != 1 || o.AuditRows != 1 || dry.Counts != (retain.Counts{}) {
		t.Fatalf("dry run counted %+v, want 2 charges, 1 exception and its audit row, and nothing removed", dry)
	}
	if !strings.Contains(dry.Summary(), "4 rows that belong to no operation") {
		t.Errorf("dry run says %q", dry.Summary())
	}
	if n := f.Count(t, `SELECT count(*) FROM provider_charges`) + f.Count(t, `SELECT count(*) FROM recon_exceptions`); n != 8 {
		t.Fatalf("the dry run changed rows: %d charges and exceptions, want 8", n)
	}
	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Orphans != (retain.Counts{}) {
		t.Errorf("a pass reports orphans counted, want them in its removed counts: %+v", rep.Orphans)
	}
	if rep.Charges != 2 || rep.Exceptions != 1 {
		t.Fatalf("removed %d charges and %d exceptions, want 2 and 1: %+v", rep.Charges, rep.Exceptions, rep)
	}
	for ref, want := range map[string]int{"re_orphan_plain": 0, "re_orphan_settled": 0, "re_orphan_open": 1,
		"re_orphan_late": 1, "re_orphan_recent": 1} {
		if n := f.Count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1`, ref); n != want {
			t.Errorf("charge %s: %d rows, want %d", ref, n, want)
		}
	}
	if n := f.Count(t, `SELECT count(*) FROM recon_exceptions`); n != 2 {
		t.Errorf("%d exceptions left, want the open one and the one resolved lately", n)
	}
	if n := f.Count(t, `SELECT count(*) FROM audit_log WHERE entity = 'recon_exception'`); n != 2 {
		t.Errorf("%d exception audit rows left, want those of the two exceptions kept", n)
	}
	// A second pass finds nothing more.
	if rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false); err != nil || rep.Charges != 0 {
		t.Fatalf("second pass removed %d charges (%v)", rep.Charges, err)
	}
}
