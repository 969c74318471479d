package ops

import (
	"context"
	"time"
)

// Tenant is the customer boundary: every key, fingerprint and lookup is scoped by it.
type Tenant struct {
	ID                    int64
	Name                  string
	RequireIdempotencyKey bool
	CreatedAt             time.Time
}

// TenantStore keeps tenants and their API tokens.
type TenantStore interface {
	// EnsureTenant returns the tenant with that name, creating it if needed.
	EnsureTenant(ctx context.Context, name string) (*Tenant, error)
	// CreateToken makes a new API token for a tenant and returns it; only its hash is kept.
	CreateToken(ctx context.Context, tenantID int64, name string) (string, error)
	// TenantByToken returns the tenant a bearer token belongs to, or EUNAUTHORIZED.
	TenantByToken(ctx context.Context, token string) (*Tenant, error)
	// Tenants lists every tenant by name.
	Tenants(ctx context.Context) ([]*Tenant, error)
}
