// Package jobstore holds the pipeline jobs' statements: jobs and job_checkpoints, the
// claims and leases of the workers, the publication of a result with its event in
// job_outbox, and the reads of the operation page's jobs. It implements jobs.Store.
package jobstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
)

var _ jobs.Store = (*Store)(nil)

// Store is the pipeline jobs' store on db's pool.
type Store struct{ db *pg.DB }

// New returns the jobs' store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// LatestForIntent implements jobs.Store with the ledger's own read: a job's worker finds
// its generation's operation by the dedup key.
func (s *Store) LatestForIntent(ctx context.Context, tenantID int64, kind ops.Kind, intentKey string) (*ops.Operation, error) {
	return s.db.LatestForIntent(ctx, tenantID, kind, intentKey)
}

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
			return nil, pg.Interpret(err, what)
		}
		out = append(out, j)
	}
	return out, pg.Interpret(rows.Err(), what)
}

// InsertJob implements jobs.Store: one statement inserts the job and its uploaded
// checkpoint, or finds the tenant's job with the same idempotency key and counts the repeat;
// the key sent with another intent (which Submit refuses) is no repeat and is not counted.
func (s *Store) InsertJob(ctx context.Context, j *jobs.Job, up jobs.Checkpoint) (*jobs.Job, bool, error) {
	args := pgx.NamedArgs{
		"id": j.ID, "tenant": j.TenantID, "key": j.IdempotencyKey, "fp": j.RequestFingerprint, "ref": j.RequestRef,
		"dedup": j.DedupKey, "dhash": j.DocumentHash, "dref": j.DocumentRef, "text": pg.NullStr(j.DocumentText),
		"pipeline": j.Pipeline, "prompt": j.PromptVersion, "profile": j.ModelProfile,
		"max_attempts": j.MaxAttempts, "max_cost": j.MaxCostMicros, "deadline": j.Deadline, "now": j.CreatedAt,
		"cp_in": up.InputHash, "cp_code": up.CodeVersion, "cp_result": pg.JSONOrNil(up.Result),
	}
	row := s.db.Pool.QueryRow(ctx, `
WITH ins AS (
	INSERT INTO jobs AS j (id, tenant_id, idempotency_key, request_fingerprint, request_ref, dedup_key,
		document_hash, document_ref, document_text, pipeline, prompt_version, model_profile,
		status, run_after, max_attempts, max_cost_micros, deadline, created_at, updated_at)
	VALUES (@id, @tenant, @key, @fp, @ref, @dedup, @dhash, @dref, @text, @pipeline, @prompt, @profile,
		'queued', @now, @max_attempts, @max_cost, @deadline, @now, @now)
	ON CONFLICT (tenant_id, idempotency_key) DO UPDATE
	SET duplicate_posts = j.duplicate_posts + CASE WHEN j.request_fingerprint = @fp THEN 1 ELSE 0 END
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
		return nil, false, pg.Interpret(err, "insert job")
	}
	return out, !existed, nil
}

// RepeatJob implements jobs.Store: one statement finds the tenant's job with the key and
// counts the repeat the way InsertJob's conflict does.
func (s *Store) RepeatJob(ctx context.Context, tenantID int64, key, fingerprint string) (*jobs.Job, error) {
	j, err := scanJob(s.db.Pool.QueryRow(ctx, `UPDATE jobs AS j
SET duplicate_posts = j.duplicate_posts + CASE WHEN j.request_fingerprint = $3 THEN 1 ELSE 0 END
WHERE j.tenant_id = $1 AND j.idempotency_key = $2
RETURNING `+jobCols, tenantID, key, fingerprint))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No job with this key.")
	}
	if err != nil {
		return nil, pg.Interpret(err, "repeat job")
	}
	return j, nil
}

// GetJob implements jobs.Store.
func (s *Store) GetJob(ctx context.Context, tenantID int64, id string) (*jobs.Job, error) {
	canonical, ok := pg.CanonicalID(id)
	if !ok {
		return nil, ops.Errorf(ops.ENOTFOUND, "No job %q.", id)
	}
	id = canonical
	j, err := scanJob(s.db.Pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs j WHERE j.id = $1 AND ($2 = 0 OR j.tenant_id = $2)`, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No job %s.", id)
	}
	if err != nil {
		return nil, pg.Interpret(err, "get job")
	}
	return j, nil
}

// claimable is the predicate of a job a worker may take: due and queued, or running under a
// lease that ran out. An unknown job is not claimable: it waits out of the claimable index
// until its operation's close queues it again (jobs_requeue_unknown, migration 00084), so a
// claim neither reads it nor looks its operation up.
const claimable = `((j.status = 'queued' AND j.run_after <= @now)
	OR (j.status = 'running' AND j.lease_until <= @now))`

// claimSpread is how many more of each tenant's claimable jobs a claim considers in its
// turns than it takes: claims that overlap skip the rows another holds, and with the spread
// each of that many overlapping claims still finds a job of a tenant that is alone in the
// queue by its turn. A claim that more overlapping claims leave short reads deeper into the
// queues (claimQuery), instead of coming back empty and waiting for the next poll.
const claimSpread = 8

// claimQuery picks the jobs a claim takes: tenants take turns, and each tenant's jobs go
// oldest first. busy is the tenants with a job in jobs_tenant_claimable_idx, found by
// skipping from one tenant's entries to the next's, so the tenants with no job cost nothing
// (the order is the index's whole key, which no other index of jobs serves: one that leads
// with the tenant too but holds every job would walk a tenant's published ones).
// due holds each busy tenant's oldest claimable jobs, read per tenant through
// jobs_tenant_claimable_idx, so a tenant with a million due jobs costs a claim no more than
// one with a few. The scan stops at the jobs not due yet, however many wait for a retry:
// every claimable job is due, since a running job was due when it was claimed and its lease
// ran out after that, and a job queued again by its operation's close keeps the run_after it
// had (a worker whose clock runs behind the one that claimed it takes it once its clock
// passes that claim). served is each such tenant's last claim. A claim takes every tenant's
// first job before anyone's second, the least recently served tenant's first; SKIP LOCKED
// passes over rows another claim holds, and the claimable predicate is checked again on the
// row it locks, so no job is claimed twice. When pick comes back short, because overlapping
// claims hold more of the tenants' oldest jobs than the spread, deeper takes the rest from
// each busy tenant's claimable jobs past the ones pick took, skipping the held ones; a
// claim that pick filled never runs it (its limit is zero). The jobs are then found by id
// (ANY of an array) so that the update reads them through the primary key.
const claimQuery = `
WITH RECURSIVE busy AS (
	(SELECT j.tenant_id FROM jobs j WHERE j.status IN ('queued', 'running')
		ORDER BY j.tenant_id, j.run_after, j.created_at, j.id LIMIT 1)
	UNION ALL
	SELECT (SELECT j.tenant_id FROM jobs j WHERE j.status IN ('queued', 'running') AND j.tenant_id > b.tenant_id
		ORDER BY j.tenant_id, j.run_after, j.created_at, j.id LIMIT 1)
	FROM busy b WHERE b.tenant_id IS NOT NULL
), due AS (
	SELECT b.tenant_id, c.id, c.run_after, c.created_at, c.turn
	FROM busy b CROSS JOIN LATERAL (
		SELECT j.id, j.run_after, j.created_at, row_number() OVER (ORDER BY j.run_after, j.created_at, j.id) AS turn
		FROM jobs j WHERE j.tenant_id = b.tenant_id AND j.run_after <= @now AND ` + claimable + `
		ORDER BY j.run_after, j.created_at, j.id LIMIT @depth
	) c
), served AS (
	SELECT d.tenant_id, (SELECT max(s.claim_seq) FROM jobs s WHERE s.tenant_id = d.tenant_id) AS seq
	FROM due d WHERE d.turn = 1
), pick AS (
	SELECT j.id FROM due JOIN served ON served.tenant_id = due.tenant_id JOIN jobs j ON j.id = due.id
	WHERE ` + claimable + `
	ORDER BY due.turn, served.seq NULLS FIRST, due.run_after, due.created_at, due.id
	LIMIT @limit
	FOR UPDATE OF j SKIP LOCKED
), deeper AS (
	SELECT c.id FROM busy b CROSS JOIN LATERAL (
		SELECT j.id FROM jobs j WHERE j.tenant_id = b.tenant_id AND j.run_after <= @now AND ` + claimable + `
			AND j.id NOT IN (SELECT id FROM pick)
		ORDER BY j.run_after, j.created_at, j.id
		LIMIT @limit - (SELECT count(*) FROM pick)
		FOR UPDATE OF j SKIP LOCKED
	) c
	WHERE b.tenant_id IS NOT NULL
	LIMIT @limit - (SELECT count(*) FROM pick)
)
UPDATE jobs j SET status = 'running', lease_owner = @owner, lease_until = @until, claims = claims + 1,
	claim_seq = nextval('jobs_claim_seq'), updated_at = @now
WHERE j.id = ANY (ARRAY(SELECT id FROM pick UNION ALL SELECT id FROM deeper))
RETURNING ` + jobCols

// ClaimJobs implements jobs.Store: tenants take turns (claimQuery).
func (s *Store) ClaimJobs(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*jobs.Job, error) {
	rows, err := s.db.Pool.Query(ctx, claimQuery, claimArgs(owner, now, leaseUntil, limit))
	if err != nil {
		return nil, pg.Interpret(err, "claim jobs")
	}
	return collectJobs(rows, "claim jobs")
}

func claimArgs(owner string, now, leaseUntil time.Time, limit int) pgx.NamedArgs {
	return pgx.NamedArgs{"now": now, "owner": owner, "until": leaseUntil, "limit": limit, "depth": limit + claimSpread}
}

// unknownAfterClose reads the operation of a job being made unknown under a share lock, and
// the job is made unknown only while that operation is unknown or expired, the statuses
// whose close queues its unknown jobs (jobs_requeue_unknown); otherwise it is queued, and
// the worker that claims it reads the operation again. The close's trigger reads the jobs
// with a snapshot taken after it locked the operation's row: a close that locked it first
// has committed when the lock is granted, and the locked read returns the closed row, so the
// job is queued at once instead of waiting for a close that already happened; one that
// comes after waits for this statement's commit and then finds the job unknown. Either way
// no job is left unknown beside a closed operation, where no claim would find it again.
const unknownAfterClose = `WITH op AS (
	SELECT o.status FROM operations o
	WHERE @status = 'unknown' AND o.id = coalesce(nullif(@op, '')::uuid, (SELECT s.operation_id FROM jobs s WHERE s.id = @id))
	FOR SHARE OF o
)`

// ClaimJob implements jobs.Store.
func (s *Store) ClaimJob(ctx context.Context, id, owner string, now, leaseUntil time.Time) (*jobs.Job, error) {
	row := s.db.Pool.QueryRow(ctx, `
WITH c AS (
	SELECT j.id FROM jobs j WHERE j.id = @id AND `+claimable+`
	FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = @owner, lease_until = @until, claims = claims + 1,
	claim_seq = nextval('jobs_claim_seq'), updated_at = @now
FROM c WHERE j.id = c.id
RETURNING `+jobCols, pgx.NamedArgs{"id": id, "now": now, "owner": owner, "until": leaseUntil})
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ECONFLICT, "Job %s is not claimable now.", id)
	}
	if err != nil {
		return nil, pg.Interpret(err, "claim job")
	}
	return j, nil
}

// ExtendJob implements jobs.Store.
func (s *Store) ExtendJob(ctx context.Context, id, owner string, now, until time.Time) error {
	tag, err := s.db.Pool.Exec(ctx, `UPDATE jobs SET lease_until = $3, updated_at = $4
WHERE id = $1 AND lease_owner = $2 AND status = 'running'`, id, owner, until, now)
	if err != nil {
		return pg.Interpret(err, "extend job lease")
	}
	if tag.RowsAffected() == 0 {
		return ops.Errorf(ops.ECONFLICT, "Job %s is no longer leased to %s.", id, owner)
	}
	return nil
}

// RequeueStranded implements jobs.Store. It reads the unknown jobs through jobs_unknown_idx
// and each one's operation by its id, so it costs what the unknown jobs number, once per
// sweep rather than at every claim.
func (s *Store) RequeueStranded(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.db.Pool.Exec(ctx, `UPDATE jobs j SET status = 'queued', updated_at = $1
FROM operations o WHERE j.status = 'unknown' AND o.id = j.operation_id AND o.status IN ('succeeded', 'failed')`, now)
	if err != nil {
		return 0, pg.Interpret(err, "requeue stranded jobs")
	}
	return int(tag.RowsAffected()), nil
}

// ChangeJob implements jobs.Store. A job made unknown waits for its operation's close, which
// queues it again (jobs_requeue_unknown); unknownAfterClose covers a close that commits
// while the worker makes it so.
func (s *Store) ChangeJob(ctx context.Context, c jobs.JobChange) (*jobs.Job, error) {
	release := c.Release || c.Status != jobs.StatusRunning
	row := s.db.Pool.QueryRow(ctx, unknownAfterClose+`
UPDATE jobs j SET status = CASE WHEN @status = 'unknown' AND coalesce((SELECT status FROM op), '') NOT IN ('unknown', 'expired')
		THEN 'queued' ELSE @status END,
	updated_at = @now,
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
		return nil, pg.Interpret(err, "change job")
	}
	return j, nil
}

// SaveCheckpoint implements jobs.Store. An ok checkpoint stays as it is: its stage ran once
// for this input and code version.
func (s *Store) SaveCheckpoint(ctx context.Context, c jobs.Checkpoint) error {
	_, err := s.db.Pool.Exec(ctx, `
INSERT INTO job_checkpoints AS k (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, attempt, result, created_at, updated_at)
VALUES (@tenant, @dedup, @job, @stage, @in, @code, @status, @attempt, @result::jsonb, @now, @now)
ON CONFLICT (dedup_key, stage, input_hash, code_version) DO UPDATE
SET status = excluded.status, attempt = excluded.attempt, result = excluded.result, job_id = excluded.job_id, updated_at = excluded.updated_at
WHERE k.status <> 'ok'`, pgx.NamedArgs{"tenant": c.TenantID, "dedup": c.DedupKey, "job": c.JobID, "stage": string(c.Stage),
		"in": c.InputHash, "code": c.CodeVersion, "status": c.Status, "attempt": c.Attempt, "result": pg.JSONOrNil(c.Result), "now": c.CreatedAt})
	return pg.Interpret(err, "save checkpoint")
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
func (s *Store) FindCheckpoint(ctx context.Context, dedupKey string, stage jobs.Stage, inputHash, codeVersion string) (*jobs.Checkpoint, error) {
	c, err := scanCheckpoint(s.db.Pool.QueryRow(ctx, `SELECT `+checkpointCols+` FROM job_checkpoints k
WHERE k.dedup_key = $1 AND k.stage = $2 AND k.input_hash = $3 AND k.code_version = $4`, dedupKey, string(stage), inputHash, codeVersion))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No %s checkpoint for this input.", stage)
	}
	if err != nil {
		return nil, pg.Interpret(err, "find checkpoint")
	}
	return &c, nil
}

// Checkpoints implements jobs.Store: the newest checkpoint of each stage of the job's
// computation, and the published checkpoint of this job only.
func (s *Store) Checkpoints(ctx context.Context, j *jobs.Job) ([]jobs.Checkpoint, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT DISTINCT ON (k.stage) `+checkpointCols+` FROM job_checkpoints k
WHERE k.dedup_key = $1 AND (k.stage <> 'published' OR k.job_id = $2::uuid)
ORDER BY k.stage, k.updated_at DESC, k.id DESC`, j.DedupKey, j.ID)
	if err != nil {
		return nil, pg.Interpret(err, "list checkpoints")
	}
	cps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Checkpoint, error) { return scanCheckpoint(r) })
	if err != nil {
		return nil, pg.Interpret(err, "list checkpoints")
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
// event commit together or not at all (ops rule 10), and only once per job. The event is
// written only while a consumer is registered for the job's tenant (RegisterEventConsumer).
func (s *Store) PublishJob(ctx context.Context, p jobs.PublishParams) (*jobs.Job, bool, error) {
	c := p.Checkpoint
	row := s.db.Pool.QueryRow(ctx, `
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
	SELECT @event_id::uuid, @topic, up.id, @payload::jsonb, @now FROM up WHERE `+jobEventConsumed+`
)
SELECT * FROM up`, pgx.NamedArgs{"id": p.Job.ID, "owner": p.Owner, "now": p.Now, "result": pg.JSONOrNil(p.Result),
		"in": c.InputHash, "code": c.CodeVersion, "attempt": c.Attempt, "cp_result": pg.JSONOrNil(c.Result),
		"event_id": p.EventID, "topic": jobs.TopicPublished, "payload": string(p.Payload)})
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.GetJob(ctx, 0, p.Job.ID)
		if gerr != nil {
			return nil, false, gerr
		}
		if cur.Status == jobs.StatusPublished {
			return cur, false, nil
		}
		return cur, false, ops.Errorf(ops.ECONFLICT, "Job %s is no longer leased to %s (now %s).", p.Job.ID, p.Owner, cur.Status)
	}
	if err != nil {
		return nil, false, pg.Interpret(err, "publish job")
	}
	return j, true, nil
}

// JobCounts returns how many jobs are in each status, for the demo and the metrics.
func (s *Store) JobCounts(ctx context.Context) (map[jobs.Status]int64, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, pg.Interpret(err, "count jobs")
	}
	defer rows.Close()
	out := map[jobs.Status]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, pg.Interpret(err, "count jobs")
		}
		out[jobs.Status(s)] = n
	}
	return out, pg.Interpret(rows.Err(), "count jobs")
}
