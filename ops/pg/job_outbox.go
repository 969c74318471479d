package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/outbox"
)

var (
	_ outbox.InboxStore = (*DB)(nil)
	_ outbox.Store      = JobOutbox{}
	_ outbox.Pruner     = JobOutbox{}
)

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
// transaction, which apply gets as an outbox.Tx. The row keeps the event's id, topic and
// entity, which applying it once needs, and never its payload: a job's event carries its
// result, which the body purge must leave nowhere, and an inbox row outlives the purge
// until the retention.
func (db *DB) ApplyOnce(ctx context.Context, consumer string, e outbox.Event, at time.Time, apply func(ctx context.Context, tx outbox.Tx) error) (bool, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return false, interpret(err, "begin inbox transaction")
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Exec(ctx, `INSERT INTO consumed_events (consumer, event_id, topic, entity_id, applied_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, event_id) DO NOTHING`, consumer, e.EventID, e.Topic, e.EntityID, at)
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
