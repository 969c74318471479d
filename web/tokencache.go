package web

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TokenCache remembers for a few seconds which tenant a bearer token belongs to, so an API
// call spends no database read on its token — the gateway's added latency counts every
// read. A revoked token keeps working for at most TTL; refusals are never cached, so a new
// token works at once.
type TokenCache struct {
	desk.Accounts
	TTL   time.Duration
	Clock ops.Clock

	mu      sync.Mutex
	tenants map[[32]byte]cachedTenant
	// epoch counts the Forgets. A lookup keeps its answer only if no Forget came while it
	// read the database: it may have read a token that was revoked meanwhile.
	epoch uint64
}

type cachedTenant struct {
	tenant *ops.Tenant
	until  time.Time
}

// maxCachedTokens bounds the cache; past it the cache starts over rather than grow.
const maxCachedTokens = 10000

// TenantByToken answers from the cache while the entry is fresh, else from Accounts.
func (c *TokenCache) TenantByToken(ctx context.Context, token string) (*ops.Tenant, error) {
	key := sha256.Sum256([]byte(token))
	now := c.Clock.Now()
	c.mu.Lock()
	e, ok := c.tenants[key]
	epoch := c.epoch
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		t := *e.tenant
		return &t, nil
	}
	t, err := c.Accounts.TenantByToken(ctx, token)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.epoch == epoch {
		if c.tenants == nil || len(c.tenants) >= maxCachedTokens {
			c.tenants = map[[32]byte]cachedTenant{}
		}
		c.tenants[key] = cachedTenant{tenant: t, until: now.Add(c.TTL)}
	}
	c.mu.Unlock()
	return t, nil
}

// Forget drops every cached token, and the answers of lookups still in flight, so a token
// revoked in this process is refused from the next request on.
func (c *TokenCache) Forget() {
	c.mu.Lock()
	c.tenants = nil
	c.epoch++
	c.mu.Unlock()
}
