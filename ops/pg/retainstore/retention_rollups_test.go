package retainstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/retain"
)

// TestRetentionLeavesRollupsAsComputed: the rollups of an hour whose operations the retention
// removed keep their counts, even when an operation of that hour that stayed open changes
// later and the rollup job would recompute its hour from the raw rows that are left.
func TestRetentionLeavesRollupsAsComputed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	created := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	closed := created.Add(time.Minute)
	seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, created, &closed)
	open := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, created, nil)

	clock := ops.NewManualClock(created.Add(time.Hour))
	roll := &recon.Rollups{Store: rollupstore.New(f.DB), Clock: clock, MaxSpan: 30 * 24 * time.Hour, MinuteKeep: -1}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	hour := func() (ops, succeeded, unknown int) {
		t.Helper()
		if err := f.DB.Pool.QueryRow(ctx, `SELECT coalesce(sum(operations), 0), coalesce(sum(succeeded), 0), coalesce(sum(unknown), 0)
			FROM rollups WHERE width_seconds = 3600 AND start = $1`, created.Truncate(time.Hour)).Scan(&ops, &succeeded, &unknown); err != nil {
			t.Fatal(err)
		}
		return
	}
	if o, s, u := hour(); o != 2 || s != 1 || u != 1 {
		t.Fatalf("hour before the retention: %d operations, %d succeeded, %d unknown; want 2, 1, 1", o, s, u)
	}

	clock.Set(created.Add(10 * 24 * time.Hour))
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	r := &retain.Retention{Store: f.retain, Clock: clock, Keep: 8 * 24 * time.Hour, Actor: "retention:test"}
	if rep, err := r.RunOnce(ctx, false); err != nil || rep.Operations != 1 {
		t.Fatalf("retention: %+v %v; want the closed operation removed", rep, err)
	}
	// The open operation of that hour is closed now: its hour is a changed one.
	clock.Advance(time.Minute)
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE operations SET status = 'failed', closed_at = $2, closed_by = 'w' WHERE id = $1`, open, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($1, 'w', 'close', 'operation', $2)`,
		clock.Now(), open); err != nil {
		t.Fatal(err)
	}
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if o, s, u := hour(); o != 2 || s != 1 || u != 1 {
		t.Fatalf("hour after the retention and a later change: %d operations, %d succeeded, %d unknown; want 2, 1, 1 as computed", o, s, u)
	}
}
