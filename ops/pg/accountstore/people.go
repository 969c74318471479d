package accountstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// Person implements desk.People.
func (s *Store) Person(ctx context.Context, id int64) (desk.Person, error) {
	var p desk.Person
	err := s.db.Pool.QueryRow(ctx, `SELECT id, email, coalesce(oidc_issuer, ''), coalesce(oidc_subject, '') FROM users WHERE id = $1`, id).
		Scan(&p.ID, &p.Email, &p.Issuer, &p.Subject)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("No user with id %d.", id), Err: err}
	}
	return p, pg.Interpret(err, "read user")
}

// accountVouchersSQL finds who created or re-enabled an account. The audit log names a
// dashboard admin by their account's email, which is unique among accounts and never
// changes, so it names one account; actors that are no account's email (the command line,
// an identity provider) match none.
const accountVouchersSQL = `
SELECT u.id, a.action, a.at FROM audit_log a JOIN users u ON lower(u.email) = lower(a.actor)
WHERE a.entity = 'user' AND a.entity_id = $1 AND a.action IN ('user.add', 'user.enable') AND a.at >= $2
ORDER BY a.at, a.id`

// AccountVouchers implements desk.People.
func (s *Store) AccountVouchers(ctx context.Context, id int64, since time.Time) ([]desk.AccountChange, error) {
	rows, err := s.db.Pool.Query(ctx, accountVouchersSQL, strconv.FormatInt(id, 10), since)
	if err != nil {
		return nil, pg.Interpret(err, "read account changes")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (desk.AccountChange, error) {
		var c desk.AccountChange
		err := r.Scan(&c.By, &c.Action, &c.At)
		return c, err
	})
	return out, pg.Interpret(err, "read account changes")
}
