package pg

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

var _ desk.Accounts = (*DB)(nil)

// MinPasswordLength is the shortest password CreateUser accepts.
const MinPasswordLength = 10

// TokenPrefix starts every API token, so a leaked one is easy to recognise in logs and by
// secret scanners.
const TokenPrefix = "stl_"

// tenantNameRe mirrors the CHECK on tenants.name so people get a readable message instead
// of a constraint violation.
var tenantNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func checkTenantName(name string) error {
	if !tenantNameRe.MatchString(name) {
		return ops.Errorf(ops.EINVALID, "Tenant name %q must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit.", name)
	}
	return nil
}

// dummyPasswordHash is compared against when no user has the email, so a failed login takes
// as long whether or not the account exists.
var dummyPasswordHash, _ = bcrypt.GenerateFromPassword([]byte("settle-no-such-user"), bcrypt.DefaultCost)

const accountUserCols = "id, email, role, created_at"

func scanAccountUser(row pgx.Row) (*desk.User, error) {
	u := &desk.User{}
	var role string
	if err := row.Scan(&u.ID, &u.Email, &role, &u.CreatedAt); err != nil {
		return nil, err
	}
	u.Role = desk.Role(role)
	return u, nil
}

const accountTenantCols = "t.id, t.name, t.require_idempotency_key, coalesce(t.stripe_account, ''), t.created_at"

func scanAccountTenant(row pgx.Row) (*ops.Tenant, error) {
	t := &ops.Tenant{}
	if err := row.Scan(&t.ID, &t.Name, &t.RequireIdempotencyKey, &t.StripeAccount, &t.CreatedAt); err != nil {
		return nil, err
	}
	return t, nil
}

// CreateUser adds a dashboard user with a bcrypt hash of the password.
func (db *DB) CreateUser(ctx context.Context, email, password string, role desk.Role) (*desk.User, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if !role.Valid() {
		return nil, ops.Errorf(ops.EINVALID, "Unknown role %q; use one of support, oncall, manager, admin.", role)
	}
	if len(password) < MinPasswordLength {
		return nil, ops.Errorf(ops.EINVALID, "The password must be at least %d characters long.", MinPasswordLength)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return nil, ops.Errorf(ops.EINVALID, "The password must be at most 72 bytes long.")
	} else if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	u, err := scanAccountUser(db.Pool.QueryRow(ctx,
		`INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3) RETURNING `+accountUserCols,
		email, string(hash), string(role)))
	if sqlState(err) == "23505" {
		return nil, &ops.Error{Code: ops.ECONFLICT, Message: fmt.Sprintf("A user with email %s already exists.", email), Err: err}
	} else if err != nil {
		return nil, translate(err, "create user")
	}
	return u, nil
}

// normalizeEmail accepts a bare address only: a display name or several addresses in the
// field are almost always a paste mistake.
func normalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return "", ops.Errorf(ops.EINVALID, "%q is not an email address.", email)
	}
	return email, nil
}

// Authenticate returns the enabled user with that email and password, or EUNAUTHORIZED. It
// never says which of the two was wrong.
func (db *DB) Authenticate(ctx context.Context, email, password string) (*desk.User, error) {
	wrong := ops.Errorf(ops.EUNAUTHORIZED, "The email or password is wrong.")
	email = strings.ToLower(strings.TrimSpace(email))
	var hash string
	u := &desk.User{}
	var role string
	err := db.Pool.QueryRow(ctx,
		`SELECT id, email, role, created_at, coalesce(password_hash, '') FROM users
		 WHERE lower(email) = $1 AND disabled_at IS NULL`, email).
		Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &hash)
	// A user of an identity provider has no password, and is answered as an unknown one.
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && hash == "") {
		_ = bcrypt.CompareHashAndPassword(dummyPasswordHash, []byte(password))
		return nil, wrong
	} else if err != nil {
		return nil, translate(err, "find user")
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); err != nil {
		return nil, wrong
	}
	u.Role = desk.Role(role)
	return u, nil
}

// UserByID returns one enabled user or ENOTFOUND; a disabled user's sessions stop working.
func (db *DB) UserByID(ctx context.Context, id int64) (*desk.User, error) {
	u, err := scanAccountUser(db.Pool.QueryRow(ctx,
		`SELECT `+accountUserCols+` FROM users WHERE id = $1 AND disabled_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("No user with id %d.", id), Err: err}
	} else if err != nil {
		return nil, translate(err, fmt.Sprintf("find user %d", id))
	}
	return u, nil
}

// EnsureTenant returns the tenant with that name, creating it if needed.
func (db *DB) EnsureTenant(ctx context.Context, name string) (*ops.Tenant, error) {
	if err := checkTenantName(name); err != nil {
		return nil, err
	}
	// The no-op update makes RETURNING give the existing row too, in one statement and
	// without a race between a select and an insert.
	t, err := scanAccountTenant(db.Pool.QueryRow(ctx,
		`INSERT INTO tenants AS t (name) VALUES ($1)
		 ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
		 RETURNING `+accountTenantCols, name))
	if err != nil {
		return nil, translate(err, "ensure tenant "+name)
	}
	return t, nil
}

// CreateToken makes a new API token for a tenant. Only its SHA-256 is stored, so the token
// is shown once, here.
func (db *DB) CreateToken(ctx context.Context, tenantID int64, name string) (string, error) {
	token, sum, err := newToken()
	if err != nil {
		return "", err
	}
	_, err = db.Pool.Exec(ctx,
		`INSERT INTO api_tokens (tenant_id, name, token_hash, prefix) VALUES ($1, $2, $3, $4)`,
		tenantID, name, sum[:], token[:8])
	if sqlState(err) == "23503" {
		return "", &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("No tenant with id %d.", tenantID), Err: err}
	} else if err != nil {
		return "", translate(err, "create token")
	}
	return token, nil
}

// TenantByToken returns the tenant a live token belongs to, or EUNAUTHORIZED. It notes
// when the token was used, to the minute, so an admin can tell a token still in use from a
// forgotten one; within the minute it writes nothing.
func (db *DB) TenantByToken(ctx context.Context, token string) (*ops.Tenant, error) {
	bad := ops.Errorf(ops.EUNAUTHORIZED, "The API token is unknown or revoked.")
	if !strings.HasPrefix(token, TokenPrefix) || len(token) != len(TokenPrefix)+64 {
		return nil, bad
	}
	sum := sha256.Sum256([]byte(token))
	t, err := scanAccountTenant(db.Pool.QueryRow(ctx, `
WITH used AS (
	UPDATE api_tokens SET last_used_at = now()
	WHERE token_hash = $1 AND revoked_at IS NULL AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
)
SELECT `+accountTenantCols+` FROM api_tokens k JOIN tenants t ON t.id = k.tenant_id
WHERE k.token_hash = $1 AND k.revoked_at IS NULL`, sum[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bad
	} else if err != nil {
		return nil, translate(err, "find token")
	}
	return t, nil
}

// Tenants lists every tenant by name.
func (db *DB) Tenants(ctx context.Context) ([]*ops.Tenant, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+accountTenantCols+` FROM tenants t ORDER BY t.name`)
	if err != nil {
		return nil, translate(err, "list tenants")
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*ops.Tenant, error) { return scanAccountTenant(r) })
	if err != nil {
		return nil, translate(err, "list tenants")
	}
	return ts, nil
}

// sqlState returns the SQLSTATE of a Postgres error in err's chain, "" for other errors.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// DeleteExpiredSessions removes dashboard sessions past their expiry and returns how many.
// The server calls it periodically instead of pgxstore's own cleanup goroutine, which
// cannot be stopped without a data race.
func (db *DB) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM sessions WHERE expiry < $1`, now)
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	return tag.RowsAffected(), nil
}
