package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// A reconciler's run renews its own lease only: not one it released, nor one another run
// took over.
func TestRenewLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Now()
	if _, ok, err := db.AcquireLease(ctx, "reconcile:stripe", "a#1", now, now.Add(3*time.Second)); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if held, err := db.RenewLease(ctx, "reconcile:stripe", "a#1", now.Add(time.Minute)); err != nil || !held {
		t.Errorf("holder's renewal: held %v (%v), want true", held, err)
	}
	if held, err := db.RenewLease(ctx, "reconcile:stripe", "b#2", now.Add(time.Minute)); err != nil || held {
		t.Errorf("another's renewal: held %v (%v), want false", held, err)
	}
	if l, ok, _ := db.AcquireLease(ctx, "reconcile:stripe", "b#2", now.Add(30*time.Second), now.Add(time.Hour)); ok || l.Owner != "a#1" {
		t.Errorf("a renewed lease was taken over by %q before it ran out", l.Owner)
	}
	if err := db.ReleaseLease(ctx, "reconcile:stripe", "a#1", now, nil, nil); err != nil {
		t.Fatal(err)
	}
	if held, err := db.RenewLease(ctx, "reconcile:stripe", "a#1", now.Add(time.Minute)); err != nil || held {
		t.Errorf("renewal after release: held %v (%v), want false", held, err)
	}
}
