package web_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/settle-dev/settle/ops/llm"
)

// Two end users of one company whose app derives keys from a message number both send
// "msg-1". Under the tenant scope (the default) the second user is answered with the
// first user's completion; a tenant that sets the user scope gets one operation and one
// answer per user, and each user's retry still replays only their own.
func TestLLMKeyScopeUserKeepsEndUsersApart(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{keyScopes: map[string]llm.KeyScope{"shop": llm.ScopeUser}})
	ctx := context.Background()
	askAs := func(tenant, user string) string {
		t.Helper()
		p := ask("what is my balance?", 0.2)
		p.User = openai.String(user)
		c := w.sdk(tenant)
		out, err := c.Chat.Completions.New(ctx, p, keyed("msg-1"))
		if err != nil {
			t.Fatalf("%s as %s: %v", tenant, user, err)
		}
		return out.ID
	}

	alice, bob := askAs("shop", "alice@example.com"), askAs("shop", "bob@example.com")
	if alice == bob {
		t.Fatalf("under the user scope bob got alice's completion %s", alice)
	}
	if again := askAs("shop", "alice@example.com"); again != alice {
		t.Fatalf("alice's retry answered %s, want her own %s replayed", again, alice)
	}
	w.generations(t, 2)
	if n := w.count(t, `SELECT count(*) FROM operations o JOIN tenants t ON t.id = o.tenant_id
		WHERE t.name = 'shop' AND o.intent_key LIKE 'user:%:msg-1' AND o.intent_key NOT LIKE '%alice%'`); n != 2 {
		t.Fatalf("shop has %d user-scoped operations of msg-1 (without the user's id in clear), want 2", n)
	}

	// The default scope: the key is the tenant's, the user is not part of the intent.
	first, second := askAs("bank", "alice@example.com"), askAs("bank", "bob@example.com")
	if first != second {
		t.Fatalf("under the tenant scope the key answered %s then %s, want one completion", first, second)
	}
	w.generations(t, 3)
}
