package accountstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// SignInExternal finds or creates the user of an identity provider's person, and makes
// their role the one the provider's groups give, in one transaction with its audit rows.
func (s *Store) SignInExternal(ctx context.Context, id desk.ExternalIdentity, role desk.Role, now time.Time) (desk.ExternalSignIn, error) {
	if !role.Valid() || id.Issuer == "" || id.Subject == "" {
		return desk.ExternalSignIn{}, fmt.Errorf("sign in %q at %q as %q: incomplete identity", id.Subject, id.Issuer, role)
	}
	email, err := normalizeEmail(id.Email)
	if ops.ErrorReason(err) == desk.ReasonEmailNotShown {
		return desk.ExternalSignIn{}, ops.Errorf(ops.EINVALID,
			"Your identity provider gave Settle an email address that would not show other people who you are: %s Ask its admin to give you a plain address.", ops.ErrorMessage(err))
	} else if err != nil {
		return desk.ExternalSignIn{}, ops.Errorf(ops.EINVALID,
			"Your identity provider did not give Settle an email address for you (it gave %q); ask its admin to release the email claim.", id.Email)
	}
	var out desk.ExternalSignIn
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		u, disabled, err := externalUser(ctx, tx, id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out.User, err = createExternalUser(ctx, tx, id, email, role, now)
			out.Created = err == nil
			return err
		case err != nil:
			return err
		case disabled:
			return desk.ErrUserDisabled()
		}
		out.User = u
		if u.Role == role {
			return nil
		}
		out.PreviousRole, u.Role = u.Role, role
		if _, err := tx.Exec(ctx, `UPDATE users SET role = $2 WHERE id = $1`, u.ID, string(role)); err != nil {
			return fmt.Errorf("set role of user %d: %w", u.ID, err)
		}
		return auditExternal(ctx, tx, id, now, "user.role", u.ID,
			map[string]any{"role": out.PreviousRole}, map[string]any{"role": role, "issuer": id.Issuer})
	})
	if err != nil {
		return desk.ExternalSignIn{}, err
	}
	return out, nil
}

// externalUser locks the user of an identity until the transaction ends, so two sign-ins
// of one person at once change and audit its role once.
func externalUser(ctx context.Context, tx pgx.Tx, id desk.ExternalIdentity) (*desk.User, bool, error) {
	u := &desk.User{}
	var role string
	var disabled bool
	err := tx.QueryRow(ctx, `SELECT id, email, role, created_at, session_generation, disabled_at IS NOT NULL FROM users
		WHERE oidc_issuer = $1 AND oidc_subject = $2 FOR UPDATE`, id.Issuer, id.Subject).
		Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &u.SessionGeneration, &disabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("find user of %s at %s: %w", id.Subject, id.Issuer, err)
	}
	u.Role = desk.Role(role)
	return u, disabled, err
}

func createExternalUser(ctx context.Context, tx pgx.Tx, id desk.ExternalIdentity, email string, role desk.Role, now time.Time) (*desk.User, error) {
	u, err := scanAccountUser(tx.QueryRow(ctx, `INSERT INTO users (email, role, oidc_issuer, oidc_subject, created_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+accountUserCols, email, string(role), id.Issuer, id.Subject, now))
	if pg.SQLState(err) == "23505" {
		// Either the email is another user's, or a sign-in of the same person at the same
		// moment created the user first; both are refused, and the second person may retry.
		return nil, &ops.Error{Code: ops.ECONFLICT, Err: err, Message: fmt.Sprintf(
			"A Settle user with email %s already exists and is not linked to this identity provider; ask a Settle admin.", email)}
	} else if err != nil {
		return nil, fmt.Errorf("create user of %s at %s: %w", id.Subject, id.Issuer, err)
	}
	return u, auditExternal(ctx, tx, id, now, "user.add", u.ID, nil,
		map[string]any{"email": u.Email, "role": role, "issuer": id.Issuer, "subject": id.Subject})
}

func auditExternal(ctx context.Context, tx pgx.Tx, id desk.ExternalIdentity, now time.Time, action string, userID int64, before, after map[string]any) error {
	var b []byte
	if before != nil {
		b, _ = json.Marshal(before)
	}
	a, _ := json.Marshal(after)
	_, err := tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
		VALUES ($1, $2, $3, 'user', $4, $5, $6)`, now, "oidc:"+id.Issuer, action, strconv.FormatInt(userID, 10), pg.JSONOrNil(b), pg.JSONOrNil(a))
	if err != nil {
		return fmt.Errorf("audit %s of user %d: %w", action, userID, err)
	}
	return nil
}
