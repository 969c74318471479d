package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/purgestore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/retainstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/retain"
)

// One table holds every role's lease: a holder renews its own lease only, never one it
// released nor one another holder took over after it ran out; each new holding gets a
// greater token, and a renewal keeps its own.
func TestLeasesTakeRenewRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a, ok, err := db.TakeLease(ctx, "rollups", "rollups:a", now, now.Add(3*time.Second))
	if err != nil || !ok || a.Token != 1 || a.Owner != "rollups:a" || !a.Until.Equal(now.Add(3*time.Second)) {
		t.Fatalf("take a free lease: %+v %v %v", a, ok, err)
	}
	if held, err := db.RenewLease(ctx, a, now.Add(time.Minute)); err != nil || !held {
		t.Errorf("holder's renewal: held %v (%v), want true", held, err)
	}
	if again, ok, err := db.TakeLease(ctx, "rollups", "rollups:a", now.Add(time.Second), now.Add(time.Minute)); err != nil || !ok || again.Token != a.Token {
		t.Errorf("the holder taking its own lease again: %+v %v %v, want it renewed with token %d", again, ok, err, a.Token)
	}
	if held, err := db.RenewLease(ctx, ops.Lease{Name: "rollups", Owner: "rollups:b", Token: a.Token}, now.Add(time.Minute)); err != nil || held {
		t.Errorf("another's renewal: held %v (%v), want false", held, err)
	}
	if l, ok, _ := db.TakeLease(ctx, "rollups", "rollups:b", now.Add(30*time.Second), now.Add(time.Hour)); ok || l.Owner != "rollups:a" || l.Token != a.Token {
		t.Errorf("a renewed lease was taken over by %+v before it ran out", l)
	}
	// Run out: the next holder has the next token, and the one before can no longer renew.
	b, ok, err := db.TakeLease(ctx, "rollups", "rollups:b", now.Add(time.Minute), now.Add(2*time.Minute))
	if err != nil || !ok || b.Token != a.Token+1 {
		t.Fatalf("take a lease that ran out: %+v %v %v, want token %d", b, ok, err, a.Token+1)
	}
	if held, err := db.RenewLease(ctx, a, now.Add(3*time.Minute)); err != nil || held {
		t.Errorf("renewal by the holder that lost it: held %v (%v), want false", held, err)
	}
	// A released lease is free at once, and is not renewed by its old holder.
	if err := db.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if held, err := db.RenewLease(ctx, b, now.Add(3*time.Minute)); err != nil || held {
		t.Errorf("renewal after release: held %v (%v), want false", held, err)
	}
	c, ok, err := db.TakeLease(ctx, "rollups", "rollups:c", now.Add(61*time.Second), now.Add(2*time.Minute))
	if err != nil || !ok || c.Token != b.Token+1 {
		t.Errorf("take a released lease: %+v %v %v, want token %d", c, ok, err, b.Token+1)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM leases`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d lease rows (%v), want one per name", n, err)
	}
}

// A holder whose role was taken over after its lease ran out (killed and back, or paused
// past its lease) writes nothing with the lease it held: every write of a role is matched on
// the token of its holding, so only the new holder's count.
func TestALostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	lost := func(name string) ops.Lease {
		t.Helper()
		old, ok, err := db.TakeLease(ctx, name, name+":old", now.Add(-time.Hour), now.Add(-time.Minute))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, ok, err := db.TakeLease(ctx, name, name+":new", now, now.Add(time.Minute)); err != nil || !ok {
			t.Fatal(ok, err)
		}
		return old
	}
	if rep, err := rollupstore.New(db).RunRollups(ctx, recon.RollupParams{Now: now, Overlap: time.Minute, MaxSpan: time.Hour,
		Lease: lost(recon.RollupRole)}); err != nil || !rep.Skipped {
		t.Errorf("rollups under a lost lease: %+v %v, want skipped", rep, err)
	}
	if st, err := rollupstore.New(db).RollupStatus(ctx); err != nil || st.Ran() {
		t.Errorf("rollup state %+v %v after a run under a lost lease", st, err)
	}
	if rep, err := purgestore.New(db).PurgeBodies(ctx, llm.PurgeParams{Now: now, Batch: 10, Lease: lost(llm.PurgeRole)}); err != nil || !rep.Skipped {
		t.Errorf("purge under a lost lease: %+v %v, want skipped", rep, err)
	}
	retention := lost(retain.Role)
	if _, locked, err := retainstore.New(db).RemoveBatch(ctx, retain.BatchParams{Now: now, Cutoff: now, Batch: 10, Lease: retention}); err != nil || locked {
		t.Errorf("retention batch under a lost lease: locked %v (%v), want false", locked, err)
	}
	if _, locked, err := retainstore.New(db).DropEmptyPartitions(ctx, retention, now, now.AddDate(10, 0, 0)); err != nil || locked {
		t.Errorf("partition drop under a lost lease: locked %v (%v), want false", locked, err)
	}
	if ok, err := reconstore.New(db).RecordRun(ctx, lost(recon.LeaseName("stripe")), now, &now, nil); err != nil || ok {
		t.Errorf("reconciler's run recorded under a lost lease: %v %v", ok, err)
	}
	var runs int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d reconciler runs recorded (%v), want none", runs, err)
	}
}
