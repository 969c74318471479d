package rollupstore_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// The backlog snapshots record the unknown and expired operations as the job saw them; an
// hour's point is its last snapshot, and a snapshot with no backlog reads as zero, not as
// missing.
func TestBacklogSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	insert := func(id, status string, created time.Time) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	status, created_at, updated_at) VALUES ($1::uuid, $2, 'refund', 'stripe', $1::text, $1::text, 'fp', $3, $4, $4)`, id, tenant, status, created); err != nil {
			t.Fatal(err)
		}
	}
	a, b := ops.NewOperationID(), ops.NewOperationID()
	insert(a, "unknown", t0.Add(-5*time.Hour))
	insert(b, "expired", t0.Add(-30*time.Hour))
	clock := ops.NewManualClock(t0.Add(10 * time.Minute))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if rep, err := roll.CatchUp(ctx); err != nil || rep.Snapshot != 2 {
		t.Fatalf("first run: %+v %v", rep, err)
	}
	// Later in the same hour the unknown one is closed; the hour's point follows.
	clock.Advance(20 * time.Minute)
	if _, err := db.Pool.Exec(ctx, `UPDATE operations SET status = 'failed', closed_at = $2 WHERE id = $1`, a, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	w := recon.Window{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}
	hourly, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: w, Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(hourly) != 1 || hourly[0].Unknown != 0 || hourly[0].Expired != 1 || !hourly[0].OldestExpired.Equal(t0.Add(-30*time.Hour)) ||
		!hourly[0].OldestUnknown.IsZero() || !hourly[0].TakenAt.Equal(clock.Now()) {
		t.Fatalf("hourly %+v", hourly)
	}
	minutes, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: w, Bucket: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 2 || minutes[0].Unknown != 1 || !minutes[0].OldestUnknown.Equal(t0.Add(-5*time.Hour)) || minutes[1].Unknown != 0 {
		t.Fatalf("per 5 minutes %+v", minutes)
	}
	// Filters narrow the groups, not the snapshots.
	other, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: w, Bucket: time.Hour, Kind: ops.KindLLMCall})
	if err != nil || len(other) != 1 || other[0].Expired != 0 {
		t.Fatalf("llm only: %+v %v", other, err)
	}
	if _, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: recon.Window{From: t0, To: t0.Add(30 * time.Second)}, Bucket: time.Hour}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("a window off whole minutes: %v", err)
	}
}

// While one replica holds the job's role, another skips its turn and changes nothing.
func TestRollupsRunOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	clock := ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	other, held, err := db.TakeLease(ctx, recon.RollupRole, "rollups:other", clock.Now(), clock.Now().Add(time.Minute))
	if err != nil || !held {
		t.Fatal(held, err)
	}
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock,
		Role: ops.NewRole(db, clock, slog.New(slog.DiscardHandler), recon.RollupRole, "rollups:test", 30*time.Second)}
	rep, err := roll.RunOnce(ctx)
	if err != nil || !rep.Skipped {
		t.Fatalf("%+v %v, want skipped", rep, err)
	}
	if st, err := rollupstore.New(db).RollupStatus(ctx); err != nil || st.Ran() {
		t.Fatalf("state %+v %v after a skipped run", st, err)
	}
	if err := db.ReleaseLease(ctx, other); err != nil {
		t.Fatal(err)
	}
	if rep, err := roll.RunOnce(ctx); err != nil || rep.Skipped || !rep.CaughtUp {
		t.Fatalf("%+v %v after the role was released", rep, err)
	}
}

// Minute rows older than the keep are deleted once the job is caught up; the quarter hours
// and hours stay exact, also when operations of pruned hours change later (their hours are
// recomputed whole from the raw rows), and a read that would need pruned minutes is
// refused rather than answered short.
func TestRollupRetentionKeepsTheLevelsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db := pgtest.New(t)
	rnd := rand.New(rand.NewPCG(7, 42))
	s := seed(t, db, rnd, end)
	clock := ops.NewManualClock(end.Add(7 * time.Hour))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock, MaxSpan: 7 * time.Hour, MinuteKeep: 24 * time.Hour}
	rep, err := roll.CatchUp(ctx)
	if err != nil || !rep.CaughtUp || rep.Pruned == 0 {
		t.Fatalf("catch up: %+v %v", rep, err)
	}
	// Three days of minutes are pruned a day per pass.
	horizon := clock.Now().Add(-24 * time.Hour).Truncate(time.Hour)
	var steps []time.Time
	for range 10 {
		st, err := rollupstore.New(db).RollupStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, st.MinutesFrom)
		if st.MinutesFrom.Equal(horizon) {
			break
		}
		if _, err := roll.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(steps); n < 3 || !steps[n-1].Equal(horizon) {
		t.Fatalf("minutes kept from %v, want steps of a day up to %s", steps, horizon)
	}
	for i := 1; i < len(steps); i++ {
		if d := steps[i].Sub(steps[i-1]); d <= 0 || d > 24*time.Hour {
			t.Fatalf("prune steps %v: more than a day at once", steps)
		}
	}
	minutesBefore := func(h time.Time) int {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM rollups WHERE width_seconds = 60 AND start < $1)
	+ (SELECT count(*) FROM rollup_money WHERE width_seconds = 60 AND start < $1)
	+ (SELECT count(*) FROM backlog_snapshots WHERE width_seconds = 60 AND at < $1)`, h).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := minutesBefore(horizon); n != 0 {
		t.Fatalf("%d minute rows older than the keep", n)
	}
	var hours int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM rollups WHERE width_seconds = 3600 AND start < $1`, horizon).Scan(&hours)
	if hours == 0 {
		t.Fatal("the hours before the keep went too")
	}
	var tenant int64
	_ = db.Pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'globex'`).Scan(&tenant)
	filters := []recon.MetricsFilter{
		{Window: recon.Window{From: end.Add(-72 * time.Hour), To: end}, Bucket: time.Hour},
		{Window: recon.Window{From: end.Add(-96 * time.Hour), To: end.Add(24 * time.Hour)}, Bucket: 24 * time.Hour},
		{Window: recon.Window{From: end.Add(-30 * time.Hour), To: end.Add(-5 * time.Hour)}, Bucket: time.Hour, TenantID: tenant},
	}
	rollupOnly := []recon.MetricsFilter{
		{Window: recon.Window{From: end.Add(-24 * time.Hour), To: end}, Bucket: 15 * time.Minute},
		{Window: recon.Window{From: end, To: end.Add(8 * time.Hour)}, Bucket: 15 * time.Minute},
		// Minute edges inside the keep are still there.
		{Window: recon.Window{From: end.Add(-2*time.Hour - 17*time.Minute), To: end.Add(-41 * time.Minute)}, Bucket: time.Hour},
	}
	checkMetrics(t, db, s, filters, rollupOnly, false)

	// Operations of pruned hours change: their hours are recomputed whole.
	lastRun := clock.Now()
	clock.Advance(10 * time.Minute)
	mutate(t, db, rnd, s, end, lastRun, clock.Now())
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	checkMetrics(t, db, s, filters, rollupOnly, false)
	before := dumpRollups(t, db)
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if after := dumpRollups(t, db); !reflect.DeepEqual(before, after) {
		t.Fatal("a repeated run changed the rollups")
	}

	// Reads that need pruned minutes are refused.
	for _, f := range []recon.MetricsFilter{
		{Window: recon.Window{From: end.Add(-50*time.Hour - 17*time.Minute), To: end.Add(-3 * time.Hour)}, Bucket: time.Hour},
		{Window: recon.Window{From: end.Add(-40 * time.Hour), To: end.Add(-39 * time.Hour)}, Bucket: 5 * time.Minute},
	} {
		if _, err := rollupstore.New(db).RollupMetrics(ctx, f); ops.ErrorCode(err) != ops.EINVALID {
			t.Errorf("rollups %+v: %v, want a refusal", f.Window, err)
		}
	}
	if _, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: recon.Window{From: end.Add(-40 * time.Hour), To: end.Add(-39 * time.Hour)}, Bucket: 15 * time.Minute}); ops.ErrorCode(err) != ops.EINVALID {
		t.Errorf("minute snapshots before the keep: %v, want a refusal", err)
	}
	if _, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: recon.Window{From: end.Add(-72 * time.Hour), To: end}, Bucket: time.Hour}); err != nil {
		t.Errorf("hourly snapshots before the keep: %v", err)
	}

	// An hour on, the keep moves by an hour, and the minutes recomputed for old changes go.
	clock.Advance(time.Hour)
	rep, err = roll.RunOnce(ctx)
	if err != nil || rep.Pruned == 0 {
		t.Fatalf("an hour on: %+v %v", rep, err)
	}
	next := clock.Now().Add(-24 * time.Hour).Truncate(time.Hour)
	if n := minutesBefore(next); n != 0 || !next.After(horizon) {
		t.Fatalf("%d minute rows before %s", n, next)
	}
	checkMetrics(t, db, s, filters[:2], rollupOnly[:1], false)
}
