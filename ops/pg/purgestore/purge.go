// Package purgestore holds the body purge's statements: they delete the prompts and
// completions of finished LLM operations and the documents and results of finished jobs
// once their keep has passed, in short batches under the purge's lease. It implements
// llm.PurgeStore.
package purgestore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg"
)

var _ llm.PurgeStore = (*Store)(nil)

// Store is the body purge's store on db's pool.
type Store struct{ db *pg.DB }

// New returns the body purge's store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// purgeOperationsSQL deletes the request and result (with its stream's events) of up to @batch
// finished LLM operations whose key's TTL (their retention) and @keep have passed, oldest
// first, on operations_body_purge_idx, which holds those finished calls only (migration
// 00073): the statement repeats its predicate, and an open call takes no entry there. Neither
// version nor status changes: no one's view goes stale.
const purgeOperationsSQL = `
WITH c AS (
	SELECT id FROM operations
	WHERE purged_at IS NULL AND kind IN ('llm_call', 'llm_job') AND status NOT IN ('received', 'in_progress')
		AND created_at < @now::timestamptz - @keep::interval
		AND created_at + make_interval(secs => retention_seconds) + @keep::interval <= @now
	ORDER BY created_at LIMIT @batch
	FOR UPDATE SKIP LOCKED
)
UPDATE operations o SET request = NULL, result = NULL, stream_events = NULL, purged_at = @now FROM c WHERE o.id = c.id`

// purgeJobsSQL deletes the document and result of up to @batch published or failed jobs
// created more than @ttl plus @keep ago, the results of their checkpoints (a later job of
// the same computation then does those stages again: a checkpoint without its result is
// never reused), and the copy of the result in their publish event once it was delivered,
// which SETTLE_OUTBOX_KEEP may keep longer. An event not yet delivered keeps it, to be
// delivered whole at least once (ops rule 10).
const purgeJobsSQL = `
WITH c AS (
	SELECT id FROM jobs
	WHERE purged_at IS NULL AND status IN ('published', 'failed')
		AND created_at < @now::timestamptz - @ttl::interval - @keep::interval
	ORDER BY created_at LIMIT @batch
	FOR UPDATE SKIP LOCKED
), j AS (
	UPDATE jobs SET document_text = NULL, result = NULL, purged_at = @now FROM c WHERE jobs.id = c.id
	RETURNING jobs.id
), cp AS (
	UPDATE job_checkpoints SET result = NULL WHERE job_id IN (SELECT id FROM j)
), ev AS (
	UPDATE job_outbox SET payload = payload - 'result'
	WHERE topic = 'job.published' AND entity_id IN (SELECT id::text FROM j) AND published_at IS NOT NULL
)
SELECT count(*) FROM j`

// stripLateEventsSQL deletes the copy of the result from up to @batch publish events of
// purged jobs delivered within the last @keep: their receiver took them only after the purge
// (it was down), which left them whole then. A pass runs every few minutes and @keep is at
// least an hour, so each is met on job_outbox_published_idx before it leaves the window.
const stripLateEventsSQL = `
UPDATE job_outbox SET payload = payload - 'result' WHERE id IN (
	SELECT o.id FROM job_outbox o JOIN jobs j ON j.id = o.entity_id::uuid
	WHERE o.published_at IS NOT NULL AND o.published_at >= @now::timestamptz - @keep::interval
		AND o.topic = 'job.published' AND o.payload ? 'result' AND j.purged_at IS NOT NULL
	LIMIT @batch)`

// PurgeBodies implements llm.PurgeStore: one short transaction per batch, each while the
// purge's lease is held, until a batch comes back short.
func (s *Store) PurgeBodies(ctx context.Context, p llm.PurgeParams) (llm.PurgeReport, error) {
	var rep llm.PurgeReport
	var stripped int
	args := pgx.NamedArgs{"now": p.Now, "keep": p.Keep, "ttl": p.JobTTL, "batch": p.Batch}
	for _, step := range []struct {
		sql  string
		what string
		n    *int
	}{{purgeOperationsSQL, "purge operation bodies", &rep.Operations}, {purgeJobsSQL, "purge job bodies", &rep.Jobs},
		{stripLateEventsSQL, "purge results from job events delivered late", &stripped}} {
		for {
			n, locked, err := s.purgeBatch(ctx, p, step.sql, args)
			if err != nil {
				return rep, pg.Interpret(err, step.what)
			}
			if !locked {
				rep.Skipped = true
				return rep, nil
			}
			*step.n += n
			if n < p.Batch || ctx.Err() != nil {
				break
			}
		}
	}
	return rep, nil
}

// purgeBatch runs one batch of sql in its own transaction, if the purge's lease is still
// held; the lease cannot be taken over before the transaction ends.
func (s *Store) purgeBatch(ctx context.Context, p llm.PurgeParams, sql string, args pgx.NamedArgs) (n int, locked bool, err error) {
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		var err error
		if locked, err = pg.HoldLease(ctx, tx, p.Lease, p.Now); err != nil || !locked {
			return err
		}
		if sql == purgeJobsSQL {
			return tx.QueryRow(ctx, sql, args).Scan(&n)
		}
		tag, err := tx.Exec(ctx, sql, args)
		n = int(tag.RowsAffected())
		return err
	})
	return n, locked, err
}
