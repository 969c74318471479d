package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/settle-dev/settle/ops"
)

var _ ops.LeaseStore = (*DB)(nil)

// TakeLease implements ops.LeaseStore in one statement: the row is taken when it ran out or
// was released, renewed when owner holds it already, and left alone otherwise. A new
// holding gets the next token; a renewal keeps its own.
func (db *DB) TakeLease(ctx context.Context, name, owner string, now, until time.Time) (ops.Lease, bool, error) {
	l := ops.Lease{Name: name}
	err := db.Pool.QueryRow(ctx, `
INSERT INTO leases AS l (name, owner, token, expires_at) VALUES (@name, @owner, 1, @until)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
	token = CASE WHEN l.owner = excluded.owner AND l.expires_at > @now THEN l.token ELSE l.token + 1 END
WHERE l.owner = excluded.owner OR l.expires_at <= @now
RETURNING owner, token, expires_at`, pgx.NamedArgs{"name": name, "owner": owner, "until": until, "now": now}).
		Scan(&l.Owner, &l.Token, &l.Until)
	if err == nil {
		return l, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return l, false, interpret(err, "take the "+name+" lease")
	}
	l, err = readLease(ctx, db.Pool, name)
	return l, false, err
}

// readLease reads the lease name as it is; a released one has a zero Until.
func readLease(ctx context.Context, q rowQuerier, name string) (ops.Lease, error) {
	l := ops.Lease{Name: name}
	var until pgtype.Timestamptz
	err := q.QueryRow(ctx, `SELECT owner, token, expires_at FROM leases WHERE name = $1`, name).Scan(&l.Owner, &l.Token, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if until.InfinityModifier == pgtype.Finite {
		l.Until = until.Time
	}
	return l, interpret(err, "read the "+name+" lease")
}

// RenewLease implements ops.LeaseStore: the row is matched on its owner and token, so a
// holder that lost its lease never extends its successor's.
func (db *DB) RenewLease(ctx context.Context, l ops.Lease, until time.Time) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `UPDATE leases SET expires_at = $4
WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > '-infinity'`, l.Name, l.Owner, l.Token, until)
	if err != nil {
		return false, interpret(err, "renew the "+l.Name+" lease")
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease implements ops.LeaseStore. The row stays, with its token, so the next holding
// gets a greater one.
func (db *DB) ReleaseLease(ctx context.Context, l ops.Lease) error {
	_, err := db.Pool.Exec(ctx, `UPDATE leases SET expires_at = '-infinity'
WHERE name = $1 AND owner = $2 AND token = $3`, l.Name, l.Owner, l.Token)
	return interpret(err, "release the "+l.Name+" lease")
}

// holdLease is the first statement of a transaction that must run only while l is held: it
// locks l's row in share mode, so the lease cannot be taken over (nor renewed) before the
// transaction ends, and reports false when l is no longer held at now, its holder having
// lost it. A zero l (no role: a test, or a one-off on a database no server uses) holds
// nothing and is always true.
func holdLease(ctx context.Context, tx pgx.Tx, l ops.Lease, now time.Time) (bool, error) {
	if l.Name == "" {
		return true, nil
	}
	var held bool
	err := tx.QueryRow(ctx, `SELECT true FROM leases WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > $4
FOR SHARE`, l.Name, l.Owner, l.Token, now).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return held, err
}

// lockLeaseRow locks the row of the lease name until the transaction ends, making the row
// first when nobody ever took the lease: in share mode for a pass of the role (which
// holdLease checks too), exclusively for a transaction of other work that must not run
// beside one: it waits for a pass under way to end, and the next pass waits for it.
func lockLeaseRow(ctx context.Context, tx pgx.Tx, name string, exclusive bool) error {
	if _, err := tx.Exec(ctx, `INSERT INTO leases (name, owner, token, expires_at) VALUES ($1, '', 1, '-infinity')
ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return err
	}
	mode := "SHARE"
	if exclusive {
		mode = "UPDATE"
	}
	_, err := tx.Exec(ctx, `SELECT 1 FROM leases WHERE name = $1 FOR `+mode, name)
	return err
}
