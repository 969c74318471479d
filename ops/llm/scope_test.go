package llm

import (
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
