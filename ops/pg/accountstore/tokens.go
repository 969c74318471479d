package accountstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// Tokens lists the API tokens, live ones first, newest first.
func (s *Store) Tokens(ctx context.Context) ([]desk.APIToken, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT k.id, t.name, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at
FROM api_tokens k JOIN tenants t ON t.id = k.tenant_id
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC LIMIT 1000`)
	if err != nil {
		return nil, pg.Interpret(err, "list tokens")
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (desk.APIToken, error) {
		var k desk.APIToken
		err := r.Scan(&k.ID, &k.Tenant, &k.Name, &k.Prefix, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
		return k, err
	})
}

// IssueToken makes a new API token for the tenant named tenant, creating the tenant if it
// is new, and records who did it, in one statement: a refusal changes nothing. Only the
// token's SHA-256 is stored: it is returned once, here.
func (s *Store) IssueToken(ctx context.Context, tenant, name, actor string, now time.Time) (string, error) {
	if err := pg.CheckTenantName(tenant); err != nil {
		return "", err
	}
	if len(name) > 100 {
		return "", ops.Errorf(ops.EINVALID, "A token's name is at most 100 characters.")
	}
	// The name is shown on one line of 'settle token list' and the admin page.
	if err := ops.CheckRef("The token's name", name, 100); err != nil {
		return "", err
	}
	token, sum, err := pg.NewToken()
	if err != nil {
		return "", err
	}
	var id int64
	err = s.db.Pool.QueryRow(ctx, `
WITH t AS (
	-- The no-op update makes RETURNING give an existing tenant too.
	INSERT INTO tenants AS t (name) VALUES (@tenant)
	ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
	RETURNING id
), k AS (
	INSERT INTO api_tokens (tenant_id, name, token_hash, prefix, created_at)
	SELECT t.id, @name, @hash, @prefix, @now FROM t
	RETURNING id, tenant_id, name, prefix
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, after)
	SELECT @now, @actor, 'token.add', 'api_token', k.id::text,
		jsonb_build_object('tenant', @tenant::text, 'tenant_id', k.tenant_id, 'name', k.name, 'prefix', k.prefix)
	FROM k
)
SELECT id FROM k`, pgx.NamedArgs{"tenant": tenant, "name": name, "hash": sum[:], "prefix": token[:8],
		"now": now, "actor": actor}).Scan(&id)
	if err != nil {
		return "", pg.Interpret(err, "issue token")
	}
	return token, nil
}

// RevokeToken revokes a token and records who did it, in one statement. Revoking a revoked
// token changes nothing and records nothing.
func (s *Store) RevokeToken(ctx context.Context, id int64, actor string, now time.Time) (desk.APIToken, error) {
	var k desk.APIToken
	err := s.db.Pool.QueryRow(ctx, `
WITH old AS (SELECT id, revoked_at FROM api_tokens WHERE id = @id FOR UPDATE),
up AS (
	UPDATE api_tokens k SET revoked_at = coalesce(k.revoked_at, @now::timestamptz)
	FROM old WHERE k.id = old.id
	RETURNING k.id, k.tenant_id, k.name, k.prefix, k.created_at, k.revoked_at, old.revoked_at IS NULL AS changed
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
	SELECT @now, @actor, 'token.revoke', 'api_token', up.id::text,
		jsonb_build_object('revoked', false), jsonb_build_object('revoked', true, 'prefix', up.prefix)
	FROM up WHERE up.changed
)
SELECT up.id, t.name, up.name, up.prefix, up.created_at, up.revoked_at FROM up JOIN tenants t ON t.id = up.tenant_id`,
		pgx.NamedArgs{"id": id, "actor": actor, "now": now}).Scan(&k.ID, &k.Tenant, &k.Name, &k.Prefix, &k.CreatedAt, &k.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, ops.Errorf(ops.ENOTFOUND, "No API token with id %d.", id)
	} else if err != nil {
		return k, pg.Interpret(err, "revoke token")
	}
	return k, nil
}
