package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/web"
)

func TestTokenCacheHonoursRevocationWithinItsTTL(t *testing.T) {
	t.Parallel()
	db := testworld.New(t).DB
	ctx := context.Background()
	clock := ops.NewManualClock(t0)
	cache := &web.TokenCache{Accounts: db, TTL: 5 * time.Second, Clock: clock}
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cache.TenantByToken(ctx, "stl_unknown"); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("unknown token: %v", err)
	}
	got, err := cache.TenantByToken(ctx, token)
	if err != nil || got.ID != tenant.ID {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now()`); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	if got, err := cache.TenantByToken(ctx, token); err != nil || got.ID != tenant.ID {
		t.Fatalf("within the TTL the cached tenant answers: %v %v", got, err)
	}
	clock.Advance(2 * time.Second)
	if _, err := cache.TenantByToken(ctx, token); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("a revoked token still works past the TTL: %v", err)
	}
}
