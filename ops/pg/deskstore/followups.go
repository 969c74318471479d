package deskstore

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// AddFollowUp implements desk.FollowUpStore with the ledger's store's statement: following
// an operation marks its row, and only the ledger's store writes operation rows.
func (s *Store) AddFollowUp(ctx context.Context, userID int64, opID string, now time.Time) (bool, error) {
	return s.db.AddFollowUp(ctx, userID, opID, now)
}

// FollowUpsOf implements desk.FollowUpStore.
func (s *Store) FollowUpsOf(ctx context.Context, userID int64, limit int) ([]desk.FollowUp, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT `+pg.OpCols+`, f.id, f.user_id, f.created_at, f.settled_at, coalesce(f.outcome, ''), f.read_at
FROM follow_ups f JOIN operations o ON o.id = f.operation_id
WHERE f.user_id = $1
ORDER BY CASE WHEN f.settled_at IS NOT NULL AND f.read_at IS NULL THEN 0 WHEN f.settled_at IS NULL THEN 1 ELSE 2 END,
	coalesce(f.settled_at, f.created_at) DESC, f.id DESC
LIMIT $2`, userID, limit)
	if err != nil {
		return nil, pg.Interpret(err, "list follow-ups")
	}
	defer rows.Close()
	var out []desk.FollowUp
	for rows.Next() {
		var f desk.FollowUp
		var outcome string
		if f.Op, err = pg.ScanOp(rows, &f.ID, &f.UserID, &f.CreatedAt, &f.SettledAt, &outcome, &f.ReadAt); err != nil {
			return nil, pg.Interpret(err, "list follow-ups")
		}
		f.Outcome = ops.Status(outcome)
		out = append(out, f)
	}
	return out, pg.Interpret(rows.Err(), "list follow-ups")
}

// UnreadFollowUps implements desk.FollowUpStore.
func (s *Store) UnreadFollowUps(ctx context.Context, userID int64) (int, error) {
	var n int
	err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM follow_ups WHERE user_id = $1 AND settled_at IS NOT NULL AND read_at IS NULL`,
		userID).Scan(&n)
	return n, pg.Interpret(err, "count follow-ups")
}

// MarkFollowUpRead implements desk.FollowUpStore.
func (s *Store) MarkFollowUpRead(ctx context.Context, userID, id int64, at time.Time) error {
	tag, err := s.db.Pool.Exec(ctx, `UPDATE follow_ups SET read_at = coalesce(read_at, $3)
WHERE id = $2 AND user_id = $1 AND settled_at IS NOT NULL`, userID, id, at)
	if err != nil {
		return pg.Interpret(err, "mark follow-up read")
	}
	if tag.RowsAffected() == 0 {
		return ops.Errorf(ops.ENOTFOUND, "No settled follow-up %d of yours.", id)
	}
	return nil
}
