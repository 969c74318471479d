package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/outbox"
)

var (
	_ outbox.Store  = (*DB)(nil)
	_ outbox.Pruner = (*DB)(nil)
)

// ClaimEvents implements outbox.Store.
func (db *DB) ClaimEvents(ctx context.Context, now, holdUntil time.Time, limit int) ([]outbox.Event, error) {
	return db.claimEvents(ctx, "outbox", "event", now, holdUntil, limit)
}

// MarkPublished implements outbox.Store.
func (db *DB) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	return db.markPublished(ctx, "outbox", "event", ids, at)
}

// MarkFailed implements outbox.Store.
func (db *DB) MarkFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error {
	return db.markFailed(ctx, "outbox", "event", id, retryAt, reason)
}

// claimEvents, markPublished, markFailed and pruneDelivered are the outbox.Store of either
// outbox table, the operations' (outbox) or the jobs' (job_outbox); what names one of its
// events in errors.

// claimEvents locks up to limit undelivered events of table that nobody holds, until
// holdUntil, oldest first.
func (db *DB) claimEvents(ctx context.Context, table, what string, now, holdUntil time.Time, limit int) ([]outbox.Event, error) {
	rows, err := db.Pool.Query(ctx, `
WITH s AS (
	SELECT id FROM `+table+`
	WHERE published_at IS NULL AND (locked_until IS NULL OR locked_until <= @now)
	ORDER BY id LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE `+table+` o SET locked_until = @hold, attempts = attempts + 1
FROM s WHERE o.id = s.id
RETURNING o.id, o.event_id::text, o.topic, o.entity_id, o.payload, o.created_at, o.attempts`,
		pgx.NamedArgs{"now": now, "hold": holdUntil, "limit": limit})
	if err != nil {
		return nil, interpret(err, "claim "+what+"s")
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Event, error) {
		var e outbox.Event
		err := r.Scan(&e.ID, &e.EventID, &e.Topic, &e.EntityID, &e.Payload, &e.CreatedAt, &e.Attempts)
		return e, err
	})
	return evs, interpret(err, "claim "+what+"s")
}

// markPublished records events of table as delivered at at.
func (db *DB) markPublished(ctx context.Context, table, what string, ids []int64, at time.Time) error {
	_, err := db.Pool.Exec(ctx, `UPDATE `+table+` SET published_at = $2, locked_until = NULL, last_error = '' WHERE id = ANY($1)`, ids, at)
	return interpret(err, "mark "+what+"s published")
}

// markFailed holds an event of table back until retryAt, with the reason its delivery failed.
func (db *DB) markFailed(ctx context.Context, table, what string, id int64, retryAt time.Time, reason string) error {
	_, err := db.Pool.Exec(ctx, `UPDATE `+table+` SET locked_until = $2, last_error = left($3, 500) WHERE id = $1`, id, retryAt, reason)
	return interpret(err, "mark "+what+" failed")
}

// pruneBatch bounds one delete, so pruning a large backlog holds no long lock.
const pruneBatch = 5000

// PruneEvents implements outbox.Pruner: it deletes events delivered before the cut-off,
// a batch at a time. Undelivered events stay, however old.
func (db *DB) PruneEvents(ctx context.Context, publishedBefore time.Time) (int64, error) {
	return db.pruneDelivered(ctx, "outbox", publishedBefore)
}

// pruneDelivered deletes the rows of an outbox table delivered before the cut-off.
func (db *DB) pruneDelivered(ctx context.Context, table string, publishedBefore time.Time) (int64, error) {
	var total int64
	for {
		tag, err := db.Pool.Exec(ctx, `
DELETE FROM `+table+` WHERE id IN (
	SELECT id FROM `+table+` WHERE published_at IS NOT NULL AND published_at < $1 LIMIT $2)`, publishedBefore, pruneBatch)
		if err != nil {
			return total, interpret(err, "prune "+table)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch || ctx.Err() != nil {
			return total, nil
		}
	}
}
