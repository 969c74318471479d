package web_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/web"
)

func TestTokenCacheHonoursRevocationWithinItsTTL(t *testing.T) {
	t.Parallel()
	db := testworld.New(t).DB
	ctx := context.Background()
	clock := ops.NewManualClock(t0)
	cache := &web.TokenCache{Accounts: accountstore.New(db), TTL: 5 * time.Second, Clock: clock}
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

// slowAccounts answers its first token lookup from the database and then holds the answer
// until the test releases it: a lookup that was in flight while the token was revoked.
type slowAccounts struct {
	desk.Accounts
	once     sync.Once
	looked   chan struct{}
	released chan struct{}
}

func (a *slowAccounts) TenantByToken(ctx context.Context, token string) (*ops.Tenant, error) {
	t, err := a.Accounts.TenantByToken(ctx, token)
	a.once.Do(func() {
		close(a.looked)
		<-a.released
	})
	return t, err
}

// TestTokenCacheForgetsALookupInFlight: a lookup that read the token before it was revoked
// answers after Forget; its answer must not be cached, or the revoked token would keep
// working for another TTL. The request after the revocation is refused at once.
func TestTokenCacheForgetsALookupInFlight(t *testing.T) {
	t.Parallel()
	db := testworld.New(t).DB
	ctx := context.Background()
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, "t")
	if err != nil {
		t.Fatal(err)
	}
	accounts := &slowAccounts{Accounts: accountstore.New(db), looked: make(chan struct{}), released: make(chan struct{})}
	cache := &web.TokenCache{Accounts: accounts, TTL: time.Minute, Clock: ops.NewManualClock(t0)}
	inFlight := make(chan error, 1)
	go func() {
		_, err := cache.TenantByToken(ctx, token)
		inFlight <- err
	}()
	<-accounts.looked
	if _, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now()`); err != nil {
		t.Fatal(err)
	}
	cache.Forget()
	close(accounts.released)
	if err := <-inFlight; err != nil {
		t.Fatalf("the lookup in flight: %v", err)
	}
	if _, err := cache.TenantByToken(ctx, token); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("a token revoked and forgotten still works: %v", err)
	}
}
