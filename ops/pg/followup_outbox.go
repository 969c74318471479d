package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/outbox"
)

// The follow-ups' notifications are the outbox's: the close that settles a follow-up writes
// them in its own transaction (migrations 00030 and 00037), and the relays here deliver
// them as the operations' outbox is delivered. The follow-ups themselves are the desk's, in
// ops/pg/deskstore.

// FollowUpOutbox is one channel's part of the follow-ups' outbox, for an outbox.Relay:
// the relays of the two channels ("webhook", "email") never hold each other's rows, so a
// receiver that fails delays only its own channel.
type FollowUpOutbox struct {
	DB      *DB
	Channel string
}

var (
	_ outbox.Store  = FollowUpOutbox{}
	_ outbox.Pruner = FollowUpOutbox{}
)

// StoppedDisabled is the last error of a follow-up notification that was never sent because
// its follower was disabled when it came to be sent.
const StoppedDisabled = "not sent: the follower is disabled"

// ClaimEvents implements outbox.Store: like the operations' outbox, a row is held by one
// relay (of any replica) until holdUntil, so only one delivers it at a time. A disabled
// person is sent nothing: a row of theirs that comes up while they are disabled, whether
// its operation settled before or after that, is taken out of the queue here, unsent, with
// StoppedDisabled as its last error (and published_at set, so it is pruned like a sent
// one). Enabling the person again resumes their follows: what comes up from then on is
// sent. Only a notification a relay already holds when the person is disabled may still
// leave.
func (o FollowUpOutbox) ClaimEvents(ctx context.Context, now, holdUntil time.Time, limit int) ([]outbox.Event, error) {
	rows, err := o.DB.Pool.Query(ctx, `
WITH s AS (
	SELECT n.id, u.disabled_at IS NOT NULL AS stopped
	FROM follow_up_outbox n JOIN follow_ups f ON f.id = n.follow_up_id JOIN users u ON u.id = f.user_id
	WHERE n.channel = @channel AND n.published_at IS NULL AND (n.locked_until IS NULL OR n.locked_until <= @now)
	ORDER BY n.id LIMIT @limit
	FOR UPDATE OF n SKIP LOCKED
), stop AS (
	UPDATE follow_up_outbox o SET published_at = @now, locked_until = NULL, last_error = @stopped
	FROM s WHERE o.id = s.id AND s.stopped
)
UPDATE follow_up_outbox o SET locked_until = @hold, attempts = attempts + 1
FROM s WHERE o.id = s.id AND NOT s.stopped
RETURNING o.id, o.event_id::text, 'follow_up.settled', o.follow_up_id::text, o.payload, o.created_at, o.attempts`,
		pgx.NamedArgs{"channel": o.Channel, "now": now, "hold": holdUntil, "limit": limit, "stopped": StoppedDisabled})
	if err != nil {
		return nil, interpret(err, "claim follow-up notifications")
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Event, error) {
		var e outbox.Event
		err := r.Scan(&e.ID, &e.EventID, &e.Topic, &e.EntityID, &e.Payload, &e.CreatedAt, &e.Attempts)
		return e, err
	})
	return evs, interpret(err, "claim follow-up notifications")
}

// MarkPublished implements outbox.Store.
func (o FollowUpOutbox) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	return o.DB.markPublished(ctx, "follow_up_outbox", "follow-up notification", ids, at)
}

// MarkFailed implements outbox.Store.
func (o FollowUpOutbox) MarkFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error {
	return o.DB.markFailed(ctx, "follow_up_outbox", "follow-up notification", id, retryAt, reason)
}

// PruneEvents implements outbox.Pruner for both channels.
func (o FollowUpOutbox) PruneEvents(ctx context.Context, publishedBefore time.Time) (int64, error) {
	return o.DB.pruneDelivered(ctx, "follow_up_outbox", publishedBefore)
}

// FollowUpDelivery is one notification row as a test or an operator reads it.
type FollowUpDelivery struct {
	EventID    string
	Channel    string
	FollowUpID int64
	Attempts   int
	LastError  string
	// PublishedAt is when the row left the queue: sent, or not sent with LastError
	// StoppedDisabled.
	PublishedAt *time.Time
}

// FollowUpDeliveries lists the follow-ups' outbox rows of one operation, oldest first.
func (db *DB) FollowUpDeliveries(ctx context.Context, opID string) ([]FollowUpDelivery, error) {
	rows, err := db.Pool.Query(ctx, `
SELECT n.event_id::text, n.channel, n.follow_up_id, n.attempts, n.last_error, n.published_at
FROM follow_up_outbox n JOIN follow_ups f ON f.id = n.follow_up_id
WHERE f.operation_id = $1 ORDER BY n.id`, opID)
	if err != nil {
		return nil, interpret(err, "list follow-up notifications")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FollowUpDelivery, error) {
		var d FollowUpDelivery
		err := r.Scan(&d.EventID, &d.Channel, &d.FollowUpID, &d.Attempts, &d.LastError, &d.PublishedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list follow-up notifications: %w", interpret(err, "read"))
	}
	return out, nil
}
