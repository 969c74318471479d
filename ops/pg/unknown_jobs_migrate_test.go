package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// unknownJob adds a job of the fixture's tenant whose generation is unknown, under an
// llm_job operation of its own, and returns the ids of the job and the operation.
func (f *fixture) unknownJob(t *testing.T, key string) (job, op string) {
	t.Helper()
	err := f.db.Pool.QueryRow(context.Background(), `
WITH o AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_by)
	VALUES (gen_random_uuid(), $1, 'llm_job', 'openai', 'job:' || $2, $2, $2, 'unknown', $3, $3, '')
	RETURNING id, tenant_id
)
INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
	prompt_version, model_profile, status, operation_id, run_after, max_attempts, deadline, created_at, updated_at)
SELECT gen_random_uuid(), o.tenant_id, $2, 'fp', $2, 'dh', 'summarise', 'v1', 'fast', 'unknown', o.id, $3, 3,
	$3::timestamptz + interval '1 day', $3, $3
FROM o RETURNING id::text, operation_id::text`, f.tenant, key, t0).Scan(&job, &op)
	if err != nil {
		t.Fatal(err)
	}
	return job, op
}

// closeByUpdate closes op as the store's close statement does, by an update of its status.
func (f *fixture) closeByUpdate(t *testing.T, op string) {
	t.Helper()
	if _, err := f.db.Pool.Exec(context.Background(), `UPDATE operations SET status = 'failed', version = version + 1,
		closed_at = $2, closed_by = 'oncall@test' WHERE id = $1`, op, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// jobStatus is the job's status as stored.
func (f *fixture) jobStatus(t *testing.T, id string) string {
	t.Helper()
	var s string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// claimableIndex is the definition of jobs_tenant_claimable_idx.
func (f *fixture) claimableIndex(t *testing.T) string {
	t.Helper()
	var def string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes
		WHERE tablename = 'jobs' AND indexname = 'jobs_tenant_claimable_idx'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	return def
}

// Migration 00084 takes the unknown jobs out of the claimable index and has a close queue
// its operation's unknown jobs (ops rule 6: with the close, in its transaction). The Down
// puts them back in the index, where the claims of before read them, and closes queue
// nothing; the Up again queues every unknown job whose operation was closed meanwhile, so
// none is left where no claim looks.
func TestTheUnknownJobsMigrationGoesBothWays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if def := f.claimableIndex(t); strings.Contains(def, "unknown") {
		t.Fatalf("the claimable index holds the unknown jobs: %s", def)
	}
	if err := f.db.MigrateDownTo(ctx, 83); err != nil {
		t.Fatal(err)
	}
	if def := f.claimableIndex(t); !strings.Contains(def, "unknown") {
		t.Fatalf("after Down the claimable index leaves the unknown jobs out: %s", def)
	}
	before, op := f.unknownJob(t, "before")
	f.closeByUpdate(t, op)
	if s := f.jobStatus(t, before); s != "unknown" {
		t.Fatalf("after Down a close made its job %s", s)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if s := f.jobStatus(t, before); s != "queued" {
		t.Errorf("after Up again the job of an operation closed meanwhile is %s, want queued", s)
	}
	if def := f.claimableIndex(t); strings.Contains(def, "unknown") {
		t.Errorf("after Up again the claimable index holds the unknown jobs: %s", def)
	}
	after, op := f.unknownJob(t, "after")
	f.closeByUpdate(t, op)
	if s := f.jobStatus(t, after); s != "queued" {
		t.Errorf("after Up again a close made its job %s, want queued", s)
	}
}
