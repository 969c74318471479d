package llm

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

func TestKeyScopes(t *testing.T) {
	ledger := ops.NewLedger(nil, ops.SystemClock{})
	if _, err := New(Config{Ledger: ledger, Upstream: nameOnly("stub"), TenantKeyScopes: map[string]KeyScope{"shop": "person"}}); err == nil {
		t.Fatal("an unknown tenant key scope was accepted")
	}
	if _, err := New(Config{Ledger: ledger, Upstream: nameOnly("stub"), KeyScope: "everyone"}); err == nil {
		t.Fatal("an unknown default key scope was accepted")
	}
	g, err := New(Config{Ledger: ledger, Upstream: nameOnly("stub"), TenantKeyScopes: map[string]KeyScope{"shop": ScopeUser}})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.intentKey("bank", "alice", "k1"); got != "k1" {
		t.Errorf("the default scope changed the key: %q", got)
	}
	a, b := g.intentKey("shop", "alice", "k1"), g.intentKey("shop", "bob", "k1")
	if a == b || !strings.HasSuffix(a, ":k1") || strings.Contains(a, "alice") {
		t.Errorf("user-scoped keys %q and %q: want distinct, ending in the client's key, without the user in clear", a, b)
	}
	if again := g.intentKey("shop", "alice", "k1"); again != a {
		t.Errorf("one user's key is not stable: %q then %q", a, again)
	}
}

// TestUserScopeIsWideAndTenantBound: under the user scope a key is shared only by one end
// user's requests, so the scope part of the intent key must be too wide to collide on
// purpose. A 48-bit hash lets a hostile end user, who controls the request's user field,
// search for a user id whose hash equals a victim's and send the victim's key and body: a
// replay would hand them another user's answer (ops rule 2: a replay answers only the
// same intent). The scope must also depend on the tenant, so that one hash of an e-mail
// address does not name the same person in every tenant's key column.
func TestUserScopeIsWideAndTenantBound(t *testing.T) {
	ledger := ops.NewLedger(nil, ops.SystemClock{})
	g, err := New(Config{Ledger: ledger, Upstream: nameOnly("stub"), KeyScope: ScopeUser})
	if err != nil {
		t.Fatal(err)
	}
	const key = "msg:1"
	scope := func(tenant, user string) string {
		t.Helper()
		k := g.intentKey(tenant, user, key)
		part, pre := strings.CutPrefix(k, "user:")
		part, suf := strings.CutSuffix(part, ":"+key)
		if !pre || !suf {
			t.Fatalf("intent key %q is not user:<scope>:<client key>", k)
		}
		raw, err := hex.DecodeString(part)
		if err != nil {
			t.Fatalf("scope part %q of %q is not hex: %v", part, k, err)
		}
		return string(raw)
	}
	alice, bob := scope("shop", "alice@example.com"), scope("shop", "bob@example.com")
	for name, s := range map[string]string{"alice": alice, "bob": bob} {
		if len(s)*8 < 128 {
			t.Errorf("%s's scope has %d bits, want at least 128: a colliding user id can be searched for", name, len(s)*8)
		}
	}
	if alice == bob {
		t.Error("two users share a scope")
	}
	if scope("bank", "alice@example.com") == alice {
		t.Error("one user id has the same scope in two tenants: the hash does not depend on the tenant")
	}
}
