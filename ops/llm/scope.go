package llm

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/settle-dev/settle/ops"
)

// KeyScope says whose requests an Idempotency-Key is shared by.
type KeyScope string

const (
	// ScopeTenant shares a key among all of a tenant's requests, as most clients expect: one
	// backend with its own key generator. The request's user is not part of the intent, so a
	// second user reusing a key gets the first user's answer (or a key_reused refusal).
	ScopeTenant KeyScope = "tenant"
	// ScopeUser makes the request's `user` field part of the key's scope: two end users of
	// one tenant reusing a key (a key derived from a message number, a screen) get two
	// operations and two answers, never each other's.
	ScopeUser KeyScope = "user"
)

// Valid reports whether s is a known scope.
func (s KeyScope) Valid() bool { return s == ScopeTenant || s == ScopeUser }

// ScopeFor returns the key scope of a tenant's calls.
func (g *Gateway) ScopeFor(tenant string) KeyScope {
	if s, ok := g.cfg.TenantKeyScopes[tenant]; ok {
		return s
	}
	return g.cfg.KeyScope
}

// intentKey is the key as the ledger keeps it. Under ScopeUser the user's share of the key
// space is a prefix made from a hash of the user (user ids may be e-mail addresses, which do
// not belong in a key column that support staff search and export); the client's key stays
// readable after it. A request without a user shares the space of other such requests.
func (g *Gateway) intentKey(tenant, user, key string) string {
	if g.ScopeFor(tenant) != ScopeUser {
		return key
	}
	sum := sha256.Sum256([]byte(user))
	return "user:" + hex.EncodeToString(sum[:6]) + ":" + key
}

// checkScopes validates the configured scopes and fills in the default.
func checkScopes(cfg *Config) error {
	if cfg.KeyScope == "" {
		cfg.KeyScope = ScopeTenant
	}
	if !cfg.KeyScope.Valid() {
		return ops.Errorf(ops.EINVALID, "Unknown key scope %q: use tenant or user.", cfg.KeyScope)
	}
	for t, s := range cfg.TenantKeyScopes {
		if !s.Valid() {
			return ops.Errorf(ops.EINVALID, "Unknown key scope %q for %s: use tenant or user.", s, t)
		}
	}
	return nil
}
