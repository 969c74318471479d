package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// Following an operation is the desk's (ops/pg/deskstore keeps the follow-ups), but it marks
// the operation's row, which the close's trigger reads under the row's lock, and only the
// ledger's store writes operation rows; so that statement is here.

// AddFollowUp records that userID follows opID, when the operation is open, for
// desk.FollowUpStore (ops/pg/deskstore forwards to it). It marks the operation followed,
// which is what lets the close's trigger (migrations 00030 and 00037) fire for it; the
// update's lock on the operation's row makes a close that runs at the same time wait for
// this insert, and the close then carries the flag and its trigger sees the new follow-up
// and settles it. A close that got there first leaves the row closed, and nothing is
// inserted. The flag is not part of the operation's version: no compare-and-set of the
// ledger fails for it.
func (db *DB) AddFollowUp(ctx context.Context, userID int64, opID string, now time.Time) (bool, error) {
	canonical, ok := CanonicalID(opID)
	if !ok {
		return false, ops.Errorf(ops.ENOTFOUND, "No operation %q.", opID)
	}
	opID = canonical
	var id int64
	err := db.Pool.QueryRow(ctx, `
WITH o AS (
	UPDATE operations SET followed = true
	WHERE id = @op AND status IN `+openStatuses+`
	RETURNING id
)
INSERT INTO follow_ups (user_id, operation_id, created_at) SELECT @user, id, @now FROM o
ON CONFLICT (user_id, operation_id) DO NOTHING
RETURNING id`, pgx.NamedArgs{"op": opID, "user": userID, "now": now}).Scan(&id)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, interpret(err, "add follow-up")
	}
	var exists bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM follow_ups WHERE user_id = $1 AND operation_id = $2)`,
		userID, opID).Scan(&exists); err != nil {
		return false, interpret(err, "add follow-up")
	}
	if exists {
		return false, nil
	}
	return false, db.lostRace(ctx, opID, "follow")
}
