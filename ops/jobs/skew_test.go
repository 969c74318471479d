package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

// A pool of job workers whose clock runs a lease ahead of the database's, gated by the skew
// guard as serve gates it, claims no job: neither the one another worker holds a live lease
// on (a second claim would pay for a second generation, ops rule 11) nor a free one. Back in
// step, it runs the free job and leaves the held one to its holder.
func TestASkewedReplicasWorkersClaimNoJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	heldJob := e.submit(t, e.tenant, "skew-held", docA, "v1")
	now, err := e.db.ServerNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := jobstore.New(e.db).ClaimJobs(ctx, "live-worker", now, now.Add(time.Minute), 1)
	if err != nil || len(claimed) != 1 || claimed[0].ID != heldJob.ID {
		t.Fatalf("claim by the live worker: %v %v", claimed, err)
	}
	free := e.submit(t, e.tenant, "skew-free", docB, "v1")

	skewed := ops.NewManualClock(now.Add(2 * time.Minute))
	w := e.worker("skewed", false)
	w.Ledger = jobs.NewLedger(e.db, skewed, time.Minute, false)
	w.Poll = 20 * time.Millisecond
	guard := ops.NewSkewGuard(e.db, skewed, ops.SkewLimit(time.Minute), slog.New(slog.DiscardHandler))
	if err := guard.Check(ctx); !errors.Is(err, ops.ErrClockSkew) {
		t.Fatalf("check of a clock two minutes ahead: %v", err)
	}
	run := func(d time.Duration) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		pool := &jobs.Pool{Workers: []*jobs.Worker{w}, Gate: guard}
		pool.Start(ctx)
		<-ctx.Done()
		pool.Wait()
	}
	run(500 * time.Millisecond)
	if got := e.job(t, heldJob.ID); got.Claims != 1 {
		t.Fatalf("the held job was claimed %d times, want once, by its live worker", got.Claims)
	}
	if got := e.job(t, free.ID); got.Claims != 0 {
		t.Fatalf("the skewed replica claimed a job (%d claims)", got.Claims)
	}

	if now, err = e.db.ServerNow(ctx); err != nil {
		t.Fatal(err)
	}
	skewed.Set(now)
	if err := guard.Check(ctx); err != nil {
		t.Fatal(err)
	}
	run(3 * time.Second)
	if got := e.job(t, free.ID); got.Status != jobs.StatusPublished {
		t.Errorf("back in step, the free job is %s, want published", got.Status)
	}
	if got := e.job(t, heldJob.ID); got.Claims != 1 {
		t.Errorf("back in step, the held job was claimed %d times, want once", got.Claims)
	}
}
