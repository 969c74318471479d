package pg_test

import (
	"context"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"testing"
	"time"
)

// Migration 00047 moves the reconciler's and the alert evaluator's lease rows into the one
// leases table, with the holders they had, and keeps the reconciler's progress; its Down
// puts both tables back as they were.
func TestLeasesMigrationKeepsHoldersAndProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	until := time.Date(2026, 3, 2, 9, 0, 30, 0, time.UTC)
	done := until.Add(-time.Hour)
	if err := f.db.MigrateDownTo(ctx, 45); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO recon_leases (name, owner, lease_until, done_until, last_run_at, last_report)
VALUES ('reconcile:stripe', 'reconciler:a#1', $1, $2, $2, '{"listed":3}'), ('reconcile:openai', '', NULL, $2, $2, NULL)`, until, done); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO alert_leases (name, owner, lease_until) VALUES ('evaluator', 'alerts:a', $1)`, until); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"reconcile:stripe": "reconciler:a#1", "alerts": "alerts:a"} {
		l, _, err := f.db.TakeLease(ctx, name, "someone else", until.Add(-time.Second), until.Add(time.Minute))
		if err != nil || l.Owner != want || !l.Until.Equal(until) {
			t.Errorf("lease %s after the migration: %+v (%v), want held by %s until %s", name, l, err, want, until)
		}
	}
	runs, err := reconstore.New(f.db).Leases(ctx)
	if err != nil || len(runs) != 2 || runs[1].Name != "reconcile:stripe" || runs[1].DoneUntil == nil || !runs[1].DoneUntil.Equal(done) ||
		string(runs[1].LastReport) != `{"listed": 3}` || runs[1].Until == nil || runs[0].Until != nil {
		t.Errorf("reconcilers after the migration: %+v (%v)", runs, err)
	}
	if err := f.db.MigrateDownTo(ctx, 45); err != nil {
		t.Fatal(err)
	}
	var owner string
	var leaseUntil, doneUntil *time.Time
	if err := f.db.Pool.QueryRow(ctx, `SELECT owner, lease_until, done_until FROM recon_leases WHERE name = 'reconcile:stripe'`).
		Scan(&owner, &leaseUntil, &doneUntil); err != nil || owner != "reconciler:a#1" || leaseUntil == nil || !leaseUntil.Equal(until) ||
		doneUntil == nil || !doneUntil.Equal(done) {
		t.Errorf("recon_leases after Down: %s %v %v (%v)", owner, leaseUntil, doneUntil, err)
	}
	if err := f.db.Pool.QueryRow(ctx, `SELECT owner FROM alert_leases WHERE name = 'evaluator'`).Scan(&owner); err != nil || owner != "alerts:a" {
		t.Errorf("alert_leases after Down: %q (%v)", owner, err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
