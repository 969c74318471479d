package pg_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// Two replicas started with one SETTLE_WORKER_ID (an environment copied to every replica,
// or containers that share a hostname and all run as pid 1, the default's two parts) still
// hold a kept role one at a time: the second one's Hold does not run while the first holds
// it, and its Release when it stops leaves the first's lease alone. Before, both were the
// same owner to the leases table, which renewed the lease for the second and let both run.
func TestAKeptRoleIsHeldByOneReplicaEvenWithOneWorkerID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	clock := ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	quiet := slog.New(slog.DiscardHandler)
	replica := func() *ops.Role {
		return ops.NewRole(db, clock, quiet, "alerts", ops.NewOwner("alerts", "settle-1"), 30*time.Second).Kept()
	}
	a, b := replica(), replica()
	first, held, err := a.Hold(ctx, func(context.Context, ops.Lease) error { return nil })
	if err != nil || !held {
		t.Fatalf("first replica: held %v %v", held, err)
	}
	ran := false
	if l, held, err := b.Hold(ctx, func(context.Context, ops.Lease) error { ran = true; return nil }); err != nil || held || ran {
		t.Fatalf("second replica held the role the first holds: %+v held %v ran %v %v", l, held, ran, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	cur, held, err := db.TakeLease(ctx, "alerts", "alerts:someone-else", clock.Now(), clock.Now().Add(time.Minute))
	if err != nil || held || cur.Owner != first.Owner || cur.Token != first.Token {
		t.Fatalf("after the second replica stopped the lease is %+v (taken by another: %v %v), want the first's %+v", cur, held, err, first)
	}
}
