package jobstore

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// jobEventConsumed is the condition, on a job up, under which its publication writes its
// job.published event (ops rule 10): some consumer is registered for the job's tenant. An
// event nobody receives would wait undelivered, and so undeleted with the result in it,
// for good.
const jobEventConsumed = `EXISTS (SELECT 1 FROM job_event_consumers c
		WHERE c.tenant_id IS NULL OR c.tenant_id = up.tenant_id)`

// RegisterEventConsumer records that name consumes the job.published events of tenantID's
// jobs (0: every tenant), so that jobs published from now on write them. Registering a
// name again replaces what it consumes. Jobs published before have no event.
func (s *Store) RegisterEventConsumer(ctx context.Context, name string, tenantID int64, at time.Time) error {
	if name == "" {
		return ops.Errorf(ops.EINVALID, "A job event consumer needs a name.")
	}
	var tenant any
	if tenantID != 0 {
		tenant = tenantID
	}
	_, err := s.db.Pool.Exec(ctx, `INSERT INTO job_event_consumers (name, tenant_id, registered_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET tenant_id = excluded.tenant_id, registered_at = excluded.registered_at`,
		name, tenant, at)
	return pg.Interpret(err, "register job event consumer")
}

// RemoveEventConsumer stops writing job events for name, and deletes the undelivered job
// events that no consumer left takes: they were waiting for a receiver taken out of the
// configuration, would never be delivered, and would keep the jobs' results for good (a
// consumer registered later receives no event of earlier jobs, ops rule 10). It returns
// how many events it deleted.
func (s *Store) RemoveEventConsumer(ctx context.Context, name string) (int64, error) {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return 0, pg.Interpret(err, "remove job event consumer")
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `DELETE FROM job_event_consumers WHERE name = $1`, name); err != nil {
		return 0, pg.Interpret(err, "remove job event consumer")
	}
	tag, err := tx.Exec(ctx, `DELETE FROM job_outbox o WHERE o.published_at IS NULL AND NOT EXISTS (
	SELECT 1 FROM job_event_consumers c WHERE c.tenant_id IS NULL
		OR c.tenant_id = (SELECT j.tenant_id FROM jobs j WHERE j.id = o.entity_id::uuid))`)
	if err != nil {
		return 0, pg.Interpret(err, "delete job events nobody receives")
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, pg.Interpret(err, "remove job event consumer")
	}
	return tag.RowsAffected(), nil
}
