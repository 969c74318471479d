package jobstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
)

// maxOperationCheckpoints bounds the checkpoints read for one computation: a few per stage
// and code version in practice, so reaching it means something is wrong, not a long page.
const maxOperationCheckpoints = 1000

// operationJobsQuery lists the jobs whose generation is operation $1. It reaches the jobs
// through the operation's intent key ("job:" + dedup key) so that jobs_dedup_idx serves it;
// operation_id alone has only a partial index (unknown jobs). A job that moved on to a newer
// operation of its key (after this one failed) no longer uses this one and is left out.
const operationJobsQuery = `SELECT ` + jobCols + `
FROM operations o
JOIN jobs j ON j.dedup_key = substr(o.intent_key, length($2) + 1) AND j.tenant_id = o.tenant_id AND j.operation_id = o.id
WHERE o.id = $1 AND o.kind = 'llm_job' AND starts_with(o.intent_key, $2)
ORDER BY j.created_at, j.id
LIMIT $3`

// operationCheckpointsQuery reads the checkpoints of one computation, newest first: the
// stages before published for every job of the key, and the published checkpoints of the
// listed jobs. job_checkpoints' unique index leads with dedup_key and serves it.
const operationCheckpointsQuery = `SELECT ` + checkpointCols + `
FROM job_checkpoints k
WHERE k.dedup_key = $1 AND (k.stage <> 'published' OR k.job_id = ANY($2::uuid[]))
ORDER BY k.updated_at DESC, k.id DESC
LIMIT $3`

// JobsForOperation returns the jobs that use the llm_job operation opID, oldest first, each
// with the newest checkpoint of every stage, as jobs.Store's Checkpoints would give it. It
// returns up to jobs.MaxOperationJobs+1 jobs, and none for an operation of another kind. Both
// reads share one snapshot so that a worker moving a job on between them cannot show a
// checkpoint the job's status contradicts.
func (s *Store) JobsForOperation(ctx context.Context, opID string) ([]jobs.OperationJob, error) {
	id, ok := pg.CanonicalID(opID)
	if !ok {
		return nil, nil // not an operation id, so no job can use it
	}
	opID = id
	tx, err := s.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, pg.Interpret(err, "begin jobs of operation")
	}
	// Read-only: rolling back is how it ends, on success too.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	rows, err := tx.Query(ctx, operationJobsQuery, opID, jobs.IntentKey(""), jobs.MaxOperationJobs+1)
	if err != nil {
		return nil, pg.Interpret(err, "list jobs of operation")
	}
	js, err := collectJobs(rows, "list jobs of operation")
	if err != nil {
		return nil, err
	}
	if len(js) == 0 {
		return nil, nil
	}
	ids := make([]string, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	rows, err = tx.Query(ctx, operationCheckpointsQuery, js[0].DedupKey, ids, maxOperationCheckpoints)
	if err != nil {
		return nil, pg.Interpret(err, "list checkpoints of operation")
	}
	cps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Checkpoint, error) { return scanCheckpoint(r) })
	if err != nil {
		return nil, pg.Interpret(err, "list checkpoints of operation")
	}
	out := make([]jobs.OperationJob, len(js))
	for i, j := range js {
		out[i] = jobs.OperationJob{Job: j, Checkpoints: stagesOf(j, cps)}
	}
	return out, nil
}

// stagesOf picks, for each stage in order, the newest of cps (which come newest first) that
// belongs to j: any for the shared stages, j's own for published.
func stagesOf(j *jobs.Job, cps []jobs.Checkpoint) []*jobs.Checkpoint {
	out := make([]*jobs.Checkpoint, len(jobs.Stages))
	for i, s := range jobs.Stages {
		for k := range cps {
			c := &cps[k]
			if c.Stage != s || (s == jobs.StagePublished && c.JobID != j.ID) {
				continue
			}
			out[i] = c
			break
		}
	}
	return out
}
