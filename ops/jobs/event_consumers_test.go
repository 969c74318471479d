package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

// A job published while no receiver of job events is registered writes no job.published
// event, and so leaves no copy of its result in job_outbox; a receiver registered for
// another tenant does not change that, and one registered later receives no event of the
// jobs published before it (ops rule 10).
func TestAJobNobodyReceivesWritesNoEvent(t *testing.T) {
	t.Parallel()
	e := newEnvNobodyReceives(t)
	ctx := context.Background()
	store := jobstore.New(e.db)
	before := e.submit(t, e.tenant, "nobody", docA, "v1")
	other := e.world.Tenant("other").ID
	if err := store.RegisterEventConsumer(ctx, "other-tenant", other, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.drain(t, e.worker("w1", false))
	if got := e.job(t, before.ID); got.Status != jobs.StatusPublished || len(got.Result) == 0 {
		t.Fatalf("job %s %s", got.Status, got.ErrorCode)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox`); n != 0 {
		t.Fatalf("%d job events written with no receiver for the job's tenant, want 0", n)
	}
	if err := store.RegisterEventConsumer(ctx, "pipeline", e.tenant, time.Now()); err != nil {
		t.Fatal(err)
	}
	after := e.submit(t, e.tenant, "received", docB, "v1")
	e.drain(t, e.worker("w1", false))
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1 AND payload ? 'result'`, after.ID); n != 1 {
		t.Fatalf("%d events of a job published with a receiver, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, before.ID); n != 0 {
		t.Fatalf("a receiver registered later got %d events of an earlier job, want 0", n)
	}
}

// Removing the last receiver of job events deletes the events still waiting for it: nobody
// will deliver them, and each holds its job's result, which would otherwise stay past
// every purge and retention (ops rule 10). Delivered events are left to the retention.
func TestRemovingTheLastJobReceiverDeletesItsUndeliveredEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	delivered := e.submit(t, e.tenant, "delivered", docA, "v1")
	waiting := e.submit(t, e.tenant, "waiting", docB, "v1")
	e.drain(t, e.worker("w1", false))
	if _, err := e.db.Pool.Exec(ctx, `UPDATE job_outbox SET published_at = now() WHERE entity_id = $1`, delivered.ID); err != nil {
		t.Fatal(err)
	}
	store := jobstore.New(e.db)
	if err := store.RegisterEventConsumer(ctx, "pipeline", e.tenant, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Another receiver of this tenant's events still takes them.
	if n, err := store.RemoveEventConsumer(ctx, "test"); err != nil || n != 0 {
		t.Fatalf("removing one of two receivers deleted %d events (%v), want 0", n, err)
	}
	if n, err := store.RemoveEventConsumer(ctx, "pipeline"); err != nil || n != 1 {
		t.Fatalf("removing the last receiver deleted %d events (%v), want 1", n, err)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, waiting.ID); n != 0 {
		t.Fatalf("%d undelivered events of a receiver taken away, want 0", n)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, delivered.ID); n != 1 {
		t.Fatalf("%d delivered events left, want 1 (the retention's to delete)", n)
	}
}
