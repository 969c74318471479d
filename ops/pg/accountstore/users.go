package accountstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// Users lists every dashboard user, enabled or not, by email, with how many open
// operations each follows.
func (s *Store) Users(ctx context.Context) ([]desk.UserAccount, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT u.id, u.email, u.role, u.created_at, u.disabled_at,
	(SELECT count(*) FROM follow_ups f WHERE f.user_id = u.id AND f.settled_at IS NULL)
FROM users u ORDER BY lower(u.email) LIMIT 1000`)
	if err != nil {
		return nil, pg.Interpret(err, "list users")
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (desk.UserAccount, error) {
		var u desk.UserAccount
		var role string
		err := r.Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &u.DisabledAt, &u.OpenFollows)
		u.Role = desk.Role(role)
		return u, err
	})
}

// SetUserRole changes a user's role and records who did it, in one statement.
func (s *Store) SetUserRole(ctx context.Context, id int64, role desk.Role, actor string, now time.Time) error {
	if !role.Valid() {
		return ops.Errorf(ops.EINVALID, "Unknown role %q; use one of support, oncall, manager, admin.", role)
	}
	return s.changeUser(ctx, id, actor, now, "user.role", `role = @role`, pgx.NamedArgs{"role": string(role)})
}

// SetUserDisabled disables or enables a user and records who did it. A disabled user's
// sessions stop working at their next request; a disable also starts the user's next
// session generation, so no session of before it works again after an enable.
func (s *Store) SetUserDisabled(ctx context.Context, id int64, disabled bool, actor string, now time.Time) error {
	action, set := "user.enable", "disabled_at = NULL"
	if disabled {
		action, set = "user.disable",
			"disabled_at = coalesce(u.disabled_at, @now::timestamptz), session_generation = u.session_generation + 1"
	}
	return s.changeUser(ctx, id, actor, now, action, set, pgx.NamedArgs{})
}

func (s *Store) changeUser(ctx context.Context, id int64, actor string, now time.Time, action, set string, args pgx.NamedArgs) error {
	args["id"], args["actor"], args["now"], args["action"] = id, actor, now, action
	var n int
	err := s.db.Pool.QueryRow(ctx, `
WITH old AS (SELECT id, role, disabled_at FROM users WHERE id = @id FOR UPDATE),
up AS (
	UPDATE users u SET `+set+` FROM old WHERE u.id = old.id
	RETURNING u.id, u.role, u.disabled_at
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
	SELECT @now, @actor, @action, 'user', up.id::text,
		jsonb_build_object('role', old.role, 'disabled', old.disabled_at IS NOT NULL),
		jsonb_build_object('role', up.role, 'disabled', up.disabled_at IS NOT NULL)
	FROM up JOIN old ON old.id = up.id
)
SELECT count(*) FROM up`, args).Scan(&n)
	if err != nil {
		return pg.Interpret(err, "change user")
	}
	if n == 0 {
		return ops.Errorf(ops.ENOTFOUND, "No user with id %d.", id)
	}
	return nil
}
