package pg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
)

// The tenants and their API tokens are the ledger's: every operation belongs to a tenant,
// and the API finds a request's tenant by its token (ops.TenantStore). The dashboard's
// administration of the tokens (listing, issuing with an audit row, revoking) is in
// ops/pg/accountstore.

var _ ops.TenantStore = (*DB)(nil)

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

// newToken returns a new API token and its SHA-256, which is all that is stored.
func newToken() (string, [32]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", [32]byte{}, fmt.Errorf("generate token: %w", err)
	}
	token := TokenPrefix + hex.EncodeToString(b)
	return token, sha256.Sum256([]byte(token)), nil
}

const accountTenantCols = "t.id, t.name, t.require_idempotency_key, coalesce(t.stripe_account, ''), coalesce(t.llm_budget_micros, 0), t.created_at"

func scanAccountTenant(row pgx.Row) (*ops.Tenant, error) {
	t := &ops.Tenant{}
	if err := row.Scan(&t.ID, &t.Name, &t.RequireIdempotencyKey, &t.StripeAccount, &t.LLMBudgetMicros, &t.CreatedAt); err != nil {
		return nil, err
	}
	return t, nil
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
