package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Deadlock victims.
//
// A group-commit batch (group) is one transaction of several statements, each locking its
// own rows in the batch's order, so two batches, or a batch and the dashboard's transactions,
// can wait on each other in a cycle; a statement sent on its own that queues for a row
// between them closes the cycle as well, and Postgres may roll that one back to break it
// (SQLSTATE 40P01). A statement sent on its own is a transaction of its own and is rolled
// back whole: nothing of it remains, so it is sent again. Without that, a client's repeat
// whose join was the victim was answered 500 with its request unrecorded (ops rule 8).
// A batch that meets a deadlock is already run again one statement at a time (group.exec),
// which goes through here.

// victimTries is how often a statement is sent while Postgres keeps choosing it as a
// deadlock's victim: each try waits for the detector, a second by default, so a few are
// enough for a cycle made by other transactions to clear.
const victimTries = 3

// deadlockVictim reports whether err says Postgres rolled the statement back to break a
// deadlock.
func deadlockVictim(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// again sends each statement through q, and sends it again while Postgres chooses it as a
// deadlock's victim. Only for a statement sent on its own: within a transaction a victim
// has lost the transaction's earlier statements too.
type again struct{ q rowQuerier }

// QueryRow implements rowQuerier; the statement is sent when its row is scanned.
func (a again) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return againRow{ctx: ctx, q: a.q, sql: sql, args: args}
}

type againRow struct {
	ctx  context.Context
	q    rowQuerier
	sql  string
	args []any
}

func (r againRow) Scan(dest ...any) error {
	var err error
	for range victimTries {
		if err = r.q.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...); !deadlockVictim(err) {
			return err
		}
	}
	return err
}

// execer is what sends one statement without rows: a pool or a connection.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// execAgain is again's Exec: it sends sql through q, and again while Postgres chooses it as
// a deadlock's victim.
func execAgain(ctx context.Context, q execer, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	for range victimTries {
		if tag, err = q.Exec(ctx, sql, args...); !deadlockVictim(err) {
			return tag, err
		}
	}
	return tag, err
}
