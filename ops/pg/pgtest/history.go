package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// SeedHistory writes one operation with a row in every table that hangs from operations,
// straight in SQL: two client requests, an attempt, evidence, two audit rows (one naming the
// evidence), a delivered and an undelivered outbox event, a charge and a provider event.
// It returns the id. SeedJob adds the rows of a pipeline job whose generation it is.
func SeedHistory(t testing.TB, db *pg.DB, tenant int64, status ops.Status, kind ops.Kind, created time.Time, closed *time.Time) string {
	t.Helper()
	id := uuid.NewString()
	_, err := db.Pool.Exec(context.Background(), `
WITH o AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status,
		retention_seconds, created_at, updated_at, closed_at, closed_by)
	VALUES (@id::text::uuid, @tenant::bigint, @kind::text, 'stripe', 'i-' || @id::text, 'k-' || @id::text, 'fp', @status::text, 86400, @created::timestamptz, @created::timestamptz, @closed::timestamptz,
		CASE WHEN @closed::timestamptz IS NULL THEN '' ELSE 'w' END)
	RETURNING id
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, received_at)
	SELECT @tenant::bigint, o.id, @kind::text, 'r', @created::timestamptz + g * interval '1 second' FROM o, generate_series(0, 1) g
), at AS (
	INSERT INTO attempts (operation_id, n, provider_key, owner, started_at) SELECT o.id, 1, 'k-' || @id::text, 'w', @created::timestamptz FROM o
), ev AS (
	INSERT INTO evidence (operation_id, kind, summary, recorded_by, recorded_at)
	SELECT o.id, 'lookup', 's', 'w', coalesce(@closed::timestamptz, @created::timestamptz) FROM o RETURNING id
), au AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, evidence_id)
	VALUES (@created::timestamptz, 'w', 'open', 'operation', @id::text, NULL),
		(coalesce(@closed::timestamptz, @created::timestamptz), 'w', 'close', 'operation', @id::text, (SELECT id FROM ev))
), ob AS (
	INSERT INTO outbox (event_id, topic, entity_id, payload, created_at, published_at)
	VALUES (gen_random_uuid(), 'operation.x', @id::text, '{}', @created::timestamptz, @created::timestamptz), (gen_random_uuid(), 'operation.y', @id::text, '{}', @created::timestamptz, NULL)
), pc AS (
	INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, charged_at, seen_at)
	SELECT @tenant::bigint, 'stripe', 're_' || @id::text, o.id, @created::timestamptz, @created::timestamptz FROM o
), pe AS (
	INSERT INTO provider_events (provider, event_id, type, operation_id, received_at)
	SELECT 'stripe', 'evt_' || @id::text, 'refund.updated', o.id, @created::timestamptz FROM o
)
SELECT 1`, historyArgs(id, tenant, status, kind, created, closed))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// SeedJob writes, for the operation id of SeedHistory, a published pipeline job with a
// checkpoint and a delivered job event, as the jobs of an llm_job operation leave them.
func SeedJob(t testing.TB, db *pg.DB, tenant int64, id string, created time.Time) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
WITH j AS (
	INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
		prompt_version, model_profile, status, operation_id, run_after, max_attempts, deadline, created_at, updated_at, published_at)
	VALUES (gen_random_uuid(), @tenant::bigint, 'job-' || @id::text, 'fp', 'd-' || @id::text, 'h', 'p', 'v1', 'm', 'published', @id::text::uuid,
		@created::timestamptz, 3, @created::timestamptz, @created::timestamptz, @created::timestamptz, @created::timestamptz)
	RETURNING id
), cp AS (
	INSERT INTO job_checkpoints (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, created_at, updated_at)
	SELECT @tenant::bigint, 'd-' || @id::text, j.id, 'uploaded', 'h', 'v1', 'ok', @created::timestamptz, @created::timestamptz FROM j
)
INSERT INTO job_outbox (event_id, topic, entity_id, payload, created_at, published_at)
SELECT gen_random_uuid(), 'job.published', j.id::text, '{}', @created::timestamptz, @created::timestamptz FROM j`, historyArgs(id, tenant, "", "", created, nil))
	if err != nil {
		t.Fatal(err)
	}
}

// SeedFinish finishes the attempt of SeedHistory's operation id as a timeout that left it in
// progress, with the finish as the attempt's own audit entry, as the ledger records it since
// migration 00076.
func SeedFinish(t testing.TB, db *pg.DB, id string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `UPDATE attempts SET finished_at = started_at, outcome = 'timeout',
	audit_id = nextval('audit_log_id_seq'), op_status = 'in_progress', op_version = 2, op_phase = 'sent_to_provider'
WHERE operation_id = $1::uuid AND n = 1`, id)
	if err != nil {
		t.Fatal(err)
	}
}

// historyArgs are the named arguments of SeedHistory's statements.
func historyArgs(id string, tenant int64, status ops.Status, kind ops.Kind, created time.Time, closed *time.Time) pgx.NamedArgs {
	return pgx.NamedArgs{"id": id, "tenant": tenant, "status": string(status), "kind": string(kind), "created": created, "closed": closed}
}

// PartitionOf says which partition of db holds the rows of table matching where.
func PartitionOf(t testing.TB, db *pg.DB, table, where string, args ...any) string {
	t.Helper()
	var name string
	if err := db.Pool.QueryRow(context.Background(), `SELECT DISTINCT tableoid::regclass::text FROM `+table+` WHERE `+where, args...).Scan(&name); err != nil {
		t.Fatalf("partition of %s where %s: %v", table, where, err)
	}
	return name
}
