package pg_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/refund"
)

// serverNow is the database's clock, as a replica in step with it reads it.
func serverNow(t *testing.T, db interface {
	ServerNow(context.Context) (time.Time, error)
}) time.Time {
	t.Helper()
	at, err := db.ServerNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// A replica whose clock runs a lease ahead of the database's sees a live lease as run out.
// Its reaper, gated by the skew guard as serve gates it, takes over neither the operation
// another replica is still sending (ops rule 11: no second send while the first may be
// under way) nor one that did stall; once its clock is back in step it reaps the stalled one
// and still leaves the live one alone.
func TestASkewedReplicasReaperTakesNoLiveOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lease := f.ledger.Limits.Lease
	now := serverNow(t, f.db)
	f.clock.Set(now.Add(-3 * lease))
	stalled, err := f.seed().Open(ctx, f.refund("skew-stalled", 700), "r1", "dead-worker")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(now)
	live, err := f.seed().Open(ctx, f.refund("skew-live", 800), "r2", "live-worker")
	if err != nil {
		t.Fatal(err)
	}

	skewed := ops.NewManualClock(serverNow(t, f.db).Add(lease + time.Minute))
	other := ops.NewLedger(f.db, skewed)
	other.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	log := slog.New(slog.DiscardHandler)
	guard := ops.NewSkewGuard(f.db, skewed, ops.SkewLimit(lease), log)
	if err := guard.Check(ctx); !errors.Is(err, ops.ErrClockSkew) {
		t.Fatalf("check of a clock %s ahead: %v, want a clock skew", lease+time.Minute, err)
	}
	reaper := (&ops.Reaper{Ledger: other, Owner: "reaper:skewed", Interval: time.Second, ClientWait: 2 * time.Hour, Logger: log}).Loop().Gated(guard)
	if _, err := reaper.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*ops.Operation{live.Op, stalled.Op} {
		if got, _ := f.db.Get(ctx, want.ID); got.Version != want.Version || got.LeaseOwner != want.LeaseOwner {
			t.Fatalf("%s after the skewed replica's pass: version %d owner %q, want untouched (%d, %q)",
				want.IntentKey, got.Version, got.LeaseOwner, want.Version, want.LeaseOwner)
		}
	}

	skewed.Set(serverNow(t, f.db))
	if err := guard.Check(ctx); err != nil || guard.Open() != nil {
		t.Fatalf("check of a clock back in step: %v", err)
	}
	if _, err := reaper.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.db.Get(ctx, stalled.Op.ID); got.Version == stalled.Op.Version {
		t.Errorf("the stalled operation was not reaped once the clock was back in step")
	}
	if got, _ := f.db.Get(ctx, live.Op.ID); got.Version != live.Op.Version || got.LeaseOwner != "live-worker" {
		t.Errorf("the live operation was taken over by %q", got.LeaseOwner)
	}
}

// A role held by another replica, live by the database's clock, is not taken over by a
// replica whose clock runs a lease ahead; back in step, it takes the role once it is free.
func TestASkewedReplicaTakesNoLiveRole(t *testing.T) {
	t.Parallel()
	db := newFixture(t).db
	ctx := context.Background()
	now := serverNow(t, db)
	held, ok, err := db.TakeLease(ctx, "skew-role", "rollups:a", now, now.Add(time.Minute))
	if err != nil || !ok {
		t.Fatalf("take the role: %v %v", ok, err)
	}
	skewed := ops.NewManualClock(now.Add(2 * time.Minute))
	log := slog.New(slog.DiscardHandler)
	guard := ops.NewSkewGuard(db, skewed, ops.SkewLimit(time.Minute), log)
	_ = guard.Check(ctx)
	role := ops.NewRole(db, skewed, log, "skew-role", "rollups:b", time.Minute)
	ran := 0
	loop := ops.NewLoop(log, "rollups", time.Second, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		_, _, err := role.Hold(ctx, func(context.Context, ops.Lease) error { ran++; return nil })
		return false, err
	}).Gated(guard)
	if _, err := loop.RunOnce(ctx); err != nil || ran != 0 {
		t.Fatalf("the skewed replica ran the role %d times (%v) while another held it", ran, err)
	}
	if l, ok, _ := db.TakeLease(ctx, "skew-role", "rollups:a", serverNow(t, db), serverNow(t, db).Add(time.Minute)); !ok || l.Token != held.Token {
		t.Fatalf("the holder lost its role: %+v", l)
	}
	if err := db.ReleaseLease(ctx, held); err != nil {
		t.Fatal(err)
	}
	skewed.Set(serverNow(t, db))
	if err := guard.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.RunOnce(ctx); err != nil || ran != 1 {
		t.Fatalf("back in step, the replica ran the free role %d times (%v), want once", ran, err)
	}
}
