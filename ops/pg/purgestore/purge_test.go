package purgestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// A published job's event carries its result, the generated summary, to the job webhook. The
// purge deletes the job's results after SETTLE_LLM_KEY_TTL plus SETTLE_LLM_BODY_KEEP, so an
// event delivered before then keeps no copy of them either, however long SETTLE_OUTBOX_KEEP
// keeps delivered events. One not yet delivered keeps its payload whole, to be delivered at
// least once (ops rule 10).
func TestPurgeLeavesNoJobResultInDeliveredEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := pgworld.New(t)
	created := pgworld.T0.Add(-30 * 24 * time.Hour)
	closed := created.Add(time.Minute)
	const secret = "the summary of a confidential contract"
	for _, delivered := range []bool{true, false} {
		id := pgtest.SeedHistory(t, w.DB, w.Tenant, ops.StatusSucceeded, ops.KindLLMJob, created, &closed)
		pgtest.SeedJob(t, w.DB, w.Tenant, id, created)
		if _, err := w.DB.Pool.Exec(ctx, `
WITH j AS (UPDATE jobs SET result = jsonb_build_object('summary', $2::text), document_text = 'doc' WHERE operation_id = $1 RETURNING id)
UPDATE job_outbox SET payload = jsonb_build_object('job_id', j.id, 'status', 'published', 'result', jsonb_build_object('summary', $2::text)),
	published_at = CASE WHEN $3 THEN published_at END
FROM j WHERE entity_id = j.id::text`, id, secret, delivered); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := purgestore.New(w.DB).PurgeBodies(ctx, llm.PurgeParams{Now: pgworld.T0, Keep: 24 * time.Hour, JobTTL: 24 * time.Hour, Batch: 10})
	if err != nil || rep.Jobs != 2 {
		t.Fatalf("purge: %+v, %v; want both jobs purged", rep, err)
	}
	count := func(q string) int {
		var n int
		if err := w.DB.Pool.QueryRow(ctx, q, secret).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM job_outbox WHERE published_at IS NOT NULL AND payload::text LIKE '%' || $1 || '%'`); n != 0 {
		t.Errorf("%d delivered job events still carry the purged result", n)
	}
	if n := count(`SELECT count(*) FROM job_outbox WHERE published_at IS NOT NULL AND payload->>'status' = 'published' AND $1 <> ''`); n != 1 {
		t.Errorf("%d delivered job events keep the rest of their payload, want 1", n)
	}
	if n := count(`SELECT count(*) FROM job_outbox WHERE published_at IS NULL AND payload->'result'->>'summary' = $1`); n != 1 {
		t.Errorf("%d undelivered job events carry their result whole, want 1", n)
	}
}

// An event its receiver took only after the purge (the receiver was down for days) loses its
// copy of the result at the next pass after its delivery.
func TestPurgeStripsAJobEventDeliveredAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := pgworld.New(t)
	created := pgworld.T0.Add(-30 * 24 * time.Hour)
	closed := created.Add(time.Minute)
	id := pgtest.SeedHistory(t, w.DB, w.Tenant, ops.StatusSucceeded, ops.KindLLMJob, created, &closed)
	pgtest.SeedJob(t, w.DB, w.Tenant, id, created)
	if _, err := w.DB.Pool.Exec(ctx, `
WITH j AS (UPDATE jobs SET result = '{"summary": "s"}' WHERE operation_id = $1 RETURNING id)
UPDATE job_outbox SET payload = jsonb_build_object('job_id', j.id, 'result', jsonb_build_object('summary', 's')), published_at = NULL
FROM j WHERE entity_id = j.id::text`, id); err != nil {
		t.Fatal(err)
	}
	purge := func(now time.Time) {
		t.Helper()
		if _, err := purgestore.New(w.DB).PurgeBodies(ctx, llm.PurgeParams{Now: now, Keep: 24 * time.Hour, JobTTL: 24 * time.Hour, Batch: 10}); err != nil {
			t.Fatal(err)
		}
	}
	purge(pgworld.T0)
	delivered := pgworld.T0.Add(3 * 24 * time.Hour)
	if _, err := w.DB.Pool.Exec(ctx, `UPDATE job_outbox SET published_at = $1 WHERE topic = 'job.published'`, delivered); err != nil {
		t.Fatal(err)
	}
	purge(delivered.Add(10 * time.Minute))
	var n int
	if err := w.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM job_outbox WHERE payload ? 'result'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d job events delivered after the purge still carry the result (%v), want 0", n, err)
	}
}
