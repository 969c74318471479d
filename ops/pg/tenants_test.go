package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestTenantsAndTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)

	acme, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	again, err := db.EnsureTenant(ctx, "acme")
	if err != nil || again.ID != acme.ID {
		t.Fatalf("EnsureTenant twice = %+v, %v; want id %d", again, err, acme.ID)
	}
	if !acme.RequireIdempotencyKey {
		t.Error("a new tenant should require an Idempotency-Key by default")
	}
	if _, err := db.EnsureTenant(ctx, "Not A Name"); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("EnsureTenant(bad name) = %v; want invalid", err)
	}
	other, err := db.EnsureTenant(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}

	token, err := db.CreateToken(ctx, acme.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "stl_") || len(token) != 4+64 {
		t.Fatalf("token %q has the wrong shape", token)
	}
	got, err := db.TenantByToken(ctx, token)
	if err != nil || got.ID != acme.ID || got.Name != "acme" {
		t.Fatalf("TenantByToken = %+v, %v; want acme", got, err)
	}

	// Only the hash and a short prefix are stored: the token itself is shown once.
	var hashLen int
	var prefix string
	if err := db.Pool.QueryRow(ctx, `SELECT octet_length(token_hash), prefix FROM api_tokens`).Scan(&hashLen, &prefix); err != nil {
		t.Fatal(err)
	}
	if hashLen != 32 || prefix != token[:8] {
		t.Fatalf("stored hash of %d bytes and prefix %q; want 32 and %q", hashLen, prefix, token[:8])
	}

	for _, bad := range []string{"", "stl_", "stl_" + strings.Repeat("0", 64), token[:len(token)-1] + "x", "Bearer " + token} {
		if tn, err := db.TenantByToken(ctx, bad); ops.ErrorCode(err) != ops.EUNAUTHORIZED || tn != nil {
			t.Errorf("TenantByToken(%q) = %v, %v; want unauthorized", bad, tn, err)
		}
	}

	if _, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now()`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TenantByToken(ctx, token); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("revoked token: %v; want unauthorized", err)
	}

	if _, err := db.CreateToken(ctx, other.ID+1000, "x"); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("CreateToken(missing tenant) = %v; want not_found", err)
	}

	ts, err := db.Tenants(ctx)
	if err != nil || len(ts) != 2 || ts[0].Name != "acme" || ts[1].Name != "beta" {
		t.Fatalf("Tenants = %v, %v", ts, err)
	}
}

func TestDeleteExpiredSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for token, expiry := range map[string]time.Time{"old": now.Add(-time.Minute), "live": now.Add(time.Minute)} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO sessions (token, data, expiry) VALUES ($1, '', $2)`, token, expiry); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.DeleteExpiredSessions(ctx, now)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpiredSessions = %d, %v; want 1", n, err)
	}
	var left string
	if err := db.Pool.QueryRow(ctx, `SELECT string_agg(token, ',') FROM sessions`).Scan(&left); err != nil || left != "live" {
		t.Fatalf("sessions left: %q, %v", left, err)
	}
}

// A token's use is noted to the minute: an older note is moved on, a recent one left, so
// the hot path writes at most once a minute per token.
func TestTokenUseIsNotedOnceAMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tn.ID, "x")
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		ks, err := accountstore.New(db).Tokens(ctx)
		if err != nil || len(ks) != 1 {
			t.Fatalf("tokens %v, %v", ks, err)
		}
		return ks[0].LastUsedAt
	}
	if lastUsed() != nil {
		t.Fatal("a new token has been used")
	}
	old := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if _, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = $1`, old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TenantByToken(ctx, token); err != nil {
		t.Fatal(err)
	}
	first := lastUsed()
	if first == nil || !first.After(old.Add(59*time.Minute)) {
		t.Fatalf("after a use an hour later: %v", first)
	}
	if _, err := db.TenantByToken(ctx, token); err != nil {
		t.Fatal(err)
	}
	if again := lastUsed(); !again.Equal(*first) {
		t.Fatalf("a second use within the minute moved it from %v to %v", first, again)
	}
}
