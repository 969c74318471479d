package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/outbox"
)

var (
	_ jobs.Store        = (*DB)(nil)
	_ outbox.InboxStore = (*DB)(nil)
	_ outbox.Store      = JobOutbox{}
	_ outbox.Pruner     = JobOutbox{}
)

// jobCols are the job columns every query returns, in scanJob's order.
const jobCols = `j.id::text, j.tenant_id, j.idempotency_key, j.request_fingerprint, j.request_ref, j.dedup_key,
	j.document_hash, j.document_ref, coalesce(j.document_text, ''), j.pipeline, j.prompt_version, j.model_profile,
	j.status, coalesce(j.operation_id::text, ''), j.lease_owner, j.lease_until, j.run_after, j.claims,
	j.llm_attempts, j.possible_duplicates, j.cost_micros, j.max_attempts, j.max_cost_micros, j.deadline,
	j.duplicate_posts, j.result, j.error_code, j.error_message, j.created_at, j.updated_at, j.published_at`

func scanJob(row pgx.Row, extra ...any) (*jobs.Job, error) {
	var j jobs.Job
	var status string
	dest := []any{&j.ID, &j.TenantID, &j.IdempotencyKey, &j.RequestFingerprint, &j.RequestRef, &j.DedupKey,
		&j.DocumentHash, &j.DocumentRef, &j.DocumentText, &j.Pipeline, &j.PromptVersion, &j.ModelProfile,
		&status, &j.OperationID, &j.LeaseOwner, &j.LeaseUntil, &j.RunAfter, &j.Claims,
		&j.LLMAttempts, &j.PossibleDuplicates, &j.CostMicros, &j.MaxAttempts, &j.MaxCostMicros, &j.Deadline,
		&j.DuplicatePosts, &j.Result, &j.ErrorCode, &j.ErrorMessage, &j.CreatedAt, &j.UpdatedAt, &j.PublishedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	j.Status = jobs.Status(status)
	return &j, nil
}

func collectJobs(rows pgx.Rows, what string) ([]*jobs.Job, error) {
	defer rows.Close()
	var out []*jobs.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, interpret(err, what)
		}
		out = append(out, j)
	}
	return out, interpret(rows.Err(), what)
}

// InsertJob implements jobs.Store: one statement inserts the job and its uploaded
// checkpoint, or finds the tenant's job with the same idempotency key and counts the repeat.
func (db *DB) InsertJob(ctx context.Context, j *jobs.Job, up jobs.Checkpoint) (*jobs.Job, bool, error) {
	args := pgx.NamedArgs{
		"id": j.ID, "tenant": j.TenantID, "key": j.IdempotencyKey, "fp": j.RequestFingerprint, "ref": j.RequestRef,
		"dedup": j.DedupKey, "dhash": j.DocumentHash, "dref": j.DocumentRef, "text": nullStr(j.DocumentText),
		"pipeline": j.Pipeline, "prompt": j.PromptVersion, "profile": j.ModelProfile,
		"max_attempts": j.MaxAttempts, "max_cost": j.MaxCostMicros, "deadline": j.Deadline, "now": j.CreatedAt,
		"cp_in": up.InputHash, "cp_code": up.CodeVersion, "cp_result": jsonOrNil(up.Result),
	}
	row := db.Pool.QueryRow(ctx, `
WITH ins AS (
	INSERT INTO jobs AS j (id, tenant_id, idempotency_key, request_fingerprint, request_ref, dedup_key,
		document_hash, document_ref, document_text, pipeline, prompt_version, model_profile,
		status, run_after, max_attempts, max_cost_micros, deadline, created_at, updated_at)
	VALUES (@id, @tenant, @key, @fp, @ref, @dedup, @dhash, @dref, @text, @pipeline, @prompt, @profile,
		'queued', @now, @max_attempts, @max_cost, @deadline, @now, @now)
	ON CONFLICT (tenant_id, idempotency_key) DO UPDATE SET duplicate_posts = j.duplicate_posts + 1
	RETURNING `+jobCols+`, (j.xmax <> 0) AS existed
), cp AS (
	INSERT INTO job_checkpoints (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, attempt, result, created_at, updated_at)
	SELECT @tenant, @dedup, @id::uuid, 'uploaded', @cp_in, @cp_code, 'ok', 0, @cp_result::jsonb, @now, @now
	FROM ins WHERE NOT existed
	ON CONFLICT (dedup_key, stage, input_hash, code_version) DO NOTHING
)
SELECT * FROM ins`, args)
	var existed bool
	out, err := scanJob(row, &existed)
	if err != nil {
		return nil, false, interpret(err, "insert job")
	}
	return out, !existed, nil
}

// GetJob implements jobs.Store.
func (db *DB) GetJob(ctx context.Context, tenantID int64, id string) (*jobs.Job, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ops.Errorf(ops.ENOTFOUND, "No job %q.", id)
	}
	j, err := scanJob(db.Pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs j WHERE j.id = $1 AND ($2 = 0 OR j.tenant_id = $2)`, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No job %s.", id)
	}
	if err != nil {
		return nil, interpret(err, "get job")
	}
	return j, nil
}

// claimable is the predicate of a job a worker may take: due and queued, running under a
// lease that ran out, or unknown with an operation someone has closed since.
const claimable = `((j.status = 'queued' AND j.run_after <= @now)
	OR (j.status = 'running' AND j.lease_until <= @now)
	OR (j.status = 'unknown' AND EXISTS (SELECT 1 FROM operations o WHERE o.id = j.operation_id AND o.status IN ('succeeded', 'failed'))))`

// ClaimJobs implements jobs.Store.
func (db *DB) ClaimJobs(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*jobs.Job, error) {
	rows, err := db.Pool.Query(ctx, `
WITH c AS (
	SELECT j.id FROM jobs j WHERE `+claimable+`
	ORDER BY j.run_after, j.created_at LIMIT @limit
	FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = @owner, lease_until = @until, claims = claims + 1, updated_at = @now
FROM c WHERE j.id = c.id
RETURNING `+jobCols, pgx.NamedArgs{"now": now, "owner": owner, "until": leaseUntil, "limit": limit})
	if err != nil {
		return nil, interpret(err, "claim jobs")
	}
	return collectJobs(rows, "claim jobs")
}

// ClaimJob implements jobs.Store.
func (db *DB) ClaimJob(ctx context.Context, id, owner string, now, leaseUntil time.Time) (*jobs.Job, error) {
	row := db.Pool.QueryRow(ctx, `
WITH c AS (
	SELECT j.id FROM jobs j WHERE j.id = @id AND `+claimable+`
	FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = @owner, lease_until = @until, claims = claims + 1, updated_at = @now
FROM c WHERE j.id = c.id
RETURNING `+jobCols, pgx.NamedArgs{"id": id, "now": now, "owner": owner, "until": leaseUntil})
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ECONFLICT, "Job %s is not claimable now.", id)
	}
	if err != nil {
		return nil, interpret(err, "claim job")
	}
	return j, nil
}

// ExtendJob implements jobs.Store.
func (db *DB) ExtendJob(ctx context.Context, id, owner string, now, until time.Time) error {
	tag, err := db.Pool.Exec(ctx, `UPDATE jobs SET lease_until = $3, updated_at = $4
WHERE id = $1 AND lease_owner = $2 AND status = 'running'`, id, owner, until, now)
	if err != nil {
		return interpret(err, "extend job lease")
	}
	if tag.RowsAffected() == 0 {
		return ops.Errorf(ops.ECONFLICT, "Job %s is no longer leased to %s.", id, owner)
	}
	return nil
}

// ChangeJob implements jobs.Store.
func (db *DB) ChangeJob(ctx context.Context, c jobs.JobChange) (*jobs.Job, error) {
	release := c.Release || c.Status != jobs.StatusRunning
	row := db.Pool.QueryRow(ctx, `
UPDATE jobs j SET status = @status, updated_at = @now,
	lease_owner = CASE WHEN @release THEN '' ELSE lease_owner END,
	lease_until = CASE WHEN @release THEN NULL ELSE lease_until END,
	run_after = coalesce(@run_after::timestamptz, run_after),
	operation_id = coalesce(nullif(@op, '')::uuid, operation_id),
	llm_attempts = llm_attempts + @att, possible_duplicates = possible_duplicates + @dups, cost_micros = cost_micros + @cost,
	error_code = @ecode, error_message = @emsg
WHERE id = @id AND lease_owner = @owner AND status = 'running'
RETURNING `+jobCols, pgx.NamedArgs{"id": c.ID, "owner": c.Owner, "now": c.Now, "status": string(c.Status), "release": release,
		"run_after": c.RunAfter, "op": c.OperationID, "att": c.AddAttempts, "dups": c.AddDuplicates, "cost": c.AddCost,
		"ecode": c.ErrorCode, "emsg": c.ErrorMessage})
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ECONFLICT, "Job %s is no longer leased to %s.", c.ID, c.Owner)
	}
	if err != nil {
		return nil, interpret(err, "change job")
	}
	return j, nil
}

// SaveCheckpoint implements jobs.Store. An ok checkpoint stays as it is: its stage ran once
// for this input and code version.
func (db *DB) SaveCheckpoint(ctx context.Context, c jobs.Checkpoint) error {
	_, err := db.Pool.Exec(ctx, `
INSERT INTO job_checkpoints AS k (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, attempt, result, created_at, updated_at)
VALUES (@tenant, @dedup, @job, @stage, @in, @code, @status, @attempt, @result::jsonb, @now, @now)
ON CONFLICT (dedup_key, stage, input_hash, code_version) DO UPDATE
SET status = excluded.status, attempt = excluded.attempt, result = excluded.result, job_id = excluded.job_id, updated_at = excluded.updated_at
WHERE k.status <> 'ok'`, pgx.NamedArgs{"tenant": c.TenantID, "dedup": c.DedupKey, "job": c.JobID, "stage": string(c.Stage),
		"in": c.InputHash, "code": c.CodeVersion, "status": c.Status, "attempt": c.Attempt, "result": jsonOrNil(c.Result), "now": c.CreatedAt})
	return interpret(err, "save checkpoint")
}

const checkpointCols = `k.tenant_id, k.dedup_key, k.job_id::text, k.stage, k.input_hash, k.code_version, k.status, k.attempt,
	k.result, k.created_at, k.updated_at`

func scanCheckpoint(row pgx.Row) (jobs.Checkpoint, error) {
	var c jobs.Checkpoint
	var stage string
	err := row.Scan(&c.TenantID, &c.DedupKey, &c.JobID, &stage, &c.InputHash, &c.CodeVersion, &c.Status, &c.Attempt,
		&c.Result, &c.CreatedAt, &c.UpdatedAt)
	c.Stage = jobs.Stage(stage)
	return c, err
}

// FindCheckpoint implements jobs.Store.
func (db *DB) FindCheckpoint(ctx context.Context, dedupKey string, stage jobs.Stage, inputHash, codeVersion string) (*jobs.Checkpoint, error) {
	c, err := scanCheckpoint(db.Pool.QueryRow(ctx, `SELECT `+checkpointCols+` FROM job_checkpoints k
WHERE k.dedup_key = $1 AND k.stage = $2 AND k.input_hash = $3 AND k.code_version = $4`, dedupKey, string(stage), inputHash, codeVersion))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No %s checkpoint for this input.", stage)
	}
	if err != nil {
		return nil, interpret(err, "find checkpoint")
	}
	return &c, nil
}

// Checkpoints implements jobs.Store: the newest checkpoint of each stage of the job's
// computation, and the published checkpoint of this job only.
func (db *DB) Checkpoints(ctx context.Context, j *jobs.Job) ([]jobs.Checkpoint, error) {
	rows, err := db.Pool.Query(ctx, `
SELECT DISTINCT ON (k.stage) `+checkpointCols+` FROM job_checkpoints k
WHERE k.dedup_key = $1 AND (k.stage <> 'published' OR k.job_id = $2::uuid)
ORDER BY k.stage, k.updated_at DESC, k.id DESC`, j.DedupKey, j.ID)
	if err != nil {
		return nil, interpret(err, "list checkpoints")
	}
	cps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Checkpoint, error) { return scanCheckpoint(r) })
	if err != nil {
		return nil, interpret(err, "list checkpoints")
	}
	// Lifecycle order, not alphabetical.
	out := make([]jobs.Checkpoint, 0, len(cps))
	for _, s := range jobs.Stages {
		for _, c := range cps {
			if c.Stage == s {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// PublishJob implements jobs.Store: the job's status, its published checkpoint and its
// event commit together or not at all (ops rule 10), and only once per job.
func (db *DB) PublishJob(ctx context.Context, p jobs.PublishParams) (*jobs.Job, bool, error) {
	c := p.Checkpoint
	row := db.Pool.QueryRow(ctx, `
WITH up AS (
	UPDATE jobs j SET status = 'published', result = @result::jsonb, published_at = @now, updated_at = @now,
		lease_owner = '', lease_until = NULL, error_code = '', error_message = ''
	WHERE id = @id AND lease_owner = @owner AND status = 'running'
	RETURNING `+jobCols+`
), cp AS (
	INSERT INTO job_checkpoints (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, attempt, result, created_at, updated_at)
	SELECT up.tenant_id, up.dedup_key, up.id::uuid, 'published', @in, @code, 'ok', @attempt, @cp_result::jsonb, @now, @now FROM up
	ON CONFLICT (dedup_key, stage, input_hash, code_version) DO NOTHING
), ob AS (
	INSERT INTO job_outbox (event_id, topic, entity_id, payload, created_at)
	SELECT @event_id::uuid, @topic, up.id, @payload::jsonb, @now FROM up
)
SELECT * FROM up`, pgx.NamedArgs{"id": p.Job.ID, "owner": p.Owner, "now": p.Now, "result": jsonOrNil(p.Result),
		"in": c.InputHash, "code": c.CodeVersion, "attempt": c.Attempt, "cp_result": jsonOrNil(c.Result),
		"event_id": p.EventID, "topic": jobs.TopicPublished, "payload": string(p.Payload)})
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := db.GetJob(ctx, 0, p.Job.ID)
		if gerr != nil {
			return nil, false, gerr
		}
		if cur.Status == jobs.StatusPublished {
			return cur, false, nil
		}
		return cur, false, ops.Errorf(ops.ECONFLICT, "Job %s is no longer leased to %s (now %s).", p.Job.ID, p.Owner, cur.Status)
	}
	if err != nil {
		return nil, false, interpret(err, "publish job")
	}
	return j, true, nil
}

// JobCounts returns how many jobs are in each status, for the demo and the metrics.
func (db *DB) JobCounts(ctx context.Context) (map[jobs.Status]int64, error) {
	rows, err := db.Pool.Query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, interpret(err, "count jobs")
	}
	defer rows.Close()
	out := map[jobs.Status]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, interpret(err, "count jobs")
		}
		out[jobs.Status(s)] = n
	}
	return out, interpret(rows.Err(), "count jobs")
}

// JobOutbox is the jobs' outbox table as an outbox.Store, for an outbox.Relay of its own.
type JobOutbox struct{ DB *DB }

// ClaimEvents implements outbox.Store.
func (o JobOutbox) ClaimEvents(ctx context.Context, now, holdUntil time.Time, limit int) ([]outbox.Event, error) {
	return o.DB.claimEvents(ctx, "job_outbox", "job event", now, holdUntil, limit)
}

// MarkPublished implements outbox.Store.
func (o JobOutbox) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	return o.DB.markPublished(ctx, "job_outbox", "job event", ids, at)
}

// PruneEvents implements outbox.Pruner. A job is published once by its status, not by
// its event row, so pruning delivered rows leaves that guarantee whole.
func (o JobOutbox) PruneEvents(ctx context.Context, publishedBefore time.Time) (int64, error) {
	return o.DB.pruneDelivered(ctx, "job_outbox", publishedBefore)
}

// MarkFailed implements outbox.Store.
func (o JobOutbox) MarkFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error {
	return o.DB.markFailed(ctx, "job_outbox", "job event", id, retryAt, reason)
}

// ApplyOnce implements outbox.InboxStore: the inbox row and apply's writes share one
// transaction, which apply gets as an outbox.Tx.
func (db *DB) ApplyOnce(ctx context.Context, consumer string, e outbox.Event, at time.Time, apply func(ctx context.Context, tx outbox.Tx) error) (bool, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return false, interpret(err, "begin inbox transaction")
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Exec(ctx, `INSERT INTO consumed_events (consumer, event_id, topic, entity_id, payload, applied_at)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, event_id) DO NOTHING`, consumer, e.EventID, e.Topic, e.EntityID, jsonOrNil(e.Payload), at)
	if err != nil {
		return false, interpret(err, "record consumed event")
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if err := apply(ctx, inboxTx{tx}); err != nil {
		return false, fmt.Errorf("apply: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, interpret(err, "commit consumed event")
	}
	return true, nil
}

// inboxTx is the inbox's transaction as outbox.Tx, for a receiver's own writes.
type inboxTx struct{ tx pgx.Tx }

// Exec implements outbox.Tx.
func (t inboxTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("receiver's statement: %w", err)
	}
	return tag.RowsAffected(), nil
}

// QueryRow implements outbox.Tx.
func (t inboxTx) QueryRow(ctx context.Context, sql string, args ...any) outbox.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}
