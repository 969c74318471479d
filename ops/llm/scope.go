package llm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

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
// space is a prefix made from a hash of the tenant and the user (user ids may be e-mail
// addresses, which do not belong in a key column that support staff search and export);
// the client's key stays readable after it. A request without a user shares the space of
// other such requests of its tenant.
//
// The prefix is 128 bits wide because whoever controls the request's user field may search
// for a user id whose prefix equals a victim's and send the victim's key: a collision would
// replay another user's answer (ops rule 2). Hashing the tenant in keeps one person's
// prefix different in every tenant, so it does not link their requests across tenants.
func (g *Gateway) intentKey(tenant, user, key string) string {
	if g.ScopeFor(tenant) != ScopeUser {
		return key
	}
	return "user:" + userScope(tenant, user) + ":" + key
}

// userScopeDomain keeps this hash apart from any other SHA-256 taken of the same fields.
const userScopeDomain = "settle llm user key scope v2"

// userScope is the hex of the first 16 bytes of SHA-256 over the domain, then the tenant
// and the user, each after its length, so that no two (tenant, user) pairs hash the same
// bytes.
func userScope(tenant, user string) string {
	b := make([]byte, 0, len(userScopeDomain)+16+len(tenant)+len(user))
	b = append(b, userScopeDomain...)
	for _, s := range []string{tenant, user} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// legacyUserKey is the user-scoped key of operations opened before the prefix was widened:
// 48 bits of SHA-256 of the user alone. A legacy key never equals a current one: its 18th
// character is the colon, where a current key has a hex digit.
func legacyUserKey(user, key string) string {
	sum := sha256.Sum256([]byte(user))
	return "user:" + hex.EncodeToString(sum[:6]) + ":" + key
}

// customerRef is the request's user as its operation records it.
func customerRef(user string) string { return ops.TruncateUTF8(user, 200) }

// admitKey is the intent key a request is admitted under: intentKey, except for an intent
// an operation opened before the upgrade still holds under its legacy key (user scope
// only). A retry of it after the deploy must be replayed or joined, not sent again
// (ops rules 1, 2 and 3), so the legacy key is used when an operation under it would still answer the
// request (open, or within the key's TTL, as the ledger's admission decides), was opened
// for this very user (its recorded customer reference, so that a user whose 48-bit hash
// collides with another's is not handed the other's operation), and no operation holds
// the current key. Most requests are new: the legacy key is looked up first, which costs one
// read when neither form has an operation; the current key is read only after a legacy hit.
func (g *Gateway) admitKey(ctx context.Context, t *ops.Tenant, user, key string) (string, error) {
	current := g.intentKey(t.Name, user, key)
	if g.ScopeFor(t.Name) != ScopeUser {
		return current, nil
	}
	old, err := g.latest(ctx, t.ID, legacyUserKey(user, key))
	if err != nil || old == nil || old.CustomerRef != customerRef(user) {
		return current, err
	}
	if old.Status.Final() && g.clock.Now().Sub(old.CreatedAt) >= g.cfg.KeyTTL {
		return current, nil
	}
	now, err := g.latest(ctx, t.ID, current)
	if err != nil || now != nil {
		return current, err
	}
	return old.IntentKey, nil
}

// latest is the newest LLM call operation of an intent key, nil when there is none.
func (g *Gateway) latest(ctx context.Context, tenantID int64, intentKey string) (*ops.Operation, error) {
	op, err := g.cfg.Ledger.LatestForIntent(ctx, tenantID, ops.KindLLMCall, intentKey)
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the intent's operation: %w", err)
	}
	return op, nil
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
