package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// One key in two tenants is two intents: nothing is shared or deduplicated across tenants.
func TestLLMSameKeyInTwoTenantsIsTwoGenerations(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	ids := map[string]bool{}
	for _, tenant := range []string{"shop", "bank"} {
		r, err := w.call(tenant, "shared-key", chatBody("hello", 0.2, false))
		id, _ := completion(t, r, err)
		ids[id] = true
	}
	w.generations(t, 2)
	if len(ids) != 2 || w.count(t, `SELECT count(DISTINCT tenant_id) FROM operations WHERE intent_key = 'shared-key'`) != 2 {
		t.Fatalf("completions %v", ids)
	}
}

// Two end users of one company whose app derives keys from a message number both send
// "msg-1". Under the tenant scope (the default) the second user is answered with the
// first user's completion; a tenant that sets the user scope gets one operation and one
// answer per user, and each user's retry still replays only their own.
func TestLLMKeyScopeUserKeepsEndUsersApart(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{keyScopes: map[string]llm.KeyScope{"shop": llm.ScopeUser}})
	askAs := func(tenant, user string) string {
		t.Helper()
		r, err := w.call(tenant, "msg-1", chatBody("what is my balance?", 0.2, false, user))
		if err != nil {
			t.Fatalf("%s as %s: %v", tenant, user, err)
		}
		id, _ := completion(t, r, err)
		return id
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

// A key stays bound to its request for its TTL: another request with it is refused and the
// same one replayed; after the TTL the key is free for a new request.
func TestLLMKeyIsFreeAfterItsTTL(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	r, err := w.call("shop", "k-ttl", chatBody("hello", 0.2, false))
	completion(t, r, err)
	w.clock.Advance(23 * time.Hour)
	r, err = w.call("shop", "k-ttl", chatBody("hello", 0.9, false))
	wantRefused(t, r, err, ops.EINVALID, llm.ReasonKeyReused)
	if r, err = w.call("shop", "k-ttl", chatBody("hello", 0.2, false)); err != nil || !r.head.Replayed {
		t.Fatalf("within the TTL: %v replayed %v", err, r.head.Replayed)
	}
	w.clock.Advance(2 * time.Hour)
	if r, err = w.call("shop", "k-ttl", chatBody("hello", 0.9, false)); err != nil || r.head.Replayed {
		t.Fatalf("after the TTL: %v replayed %v", err, r.head.Replayed)
	}
	completion(t, r, err)
	w.generations(t, 2)
}

// TestLLMPersonsFailedKeepsTheKey: a batch call timed out after the provider billed it; a
// person closes it as failed with a note. The client's retry with the same key, even after
// the close, gets the failure and sends nothing: a new generation would bill again. Only a
// new key asks again, or the same one once its TTL has passed.
func TestLLMPersonsFailedKeepsTheKey(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{attemptTimeout: 300 * time.Millisecond, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Calls: []int{1}, Delay: 3 * time.Second})
	r, err := w.call("pipeline", "doc-7", chatBody("classify document 7", 0, false))
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	op := w.op(t, "doc-7")
	d := &desk.Desk{Ledger: w.world.Ledger(w.clock)}
	if _, err := d.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
		Note: "Provider's usage shows nothing I can match.", Actor: "oncall@example.com"}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	r, err = w.call("pipeline", "doc-7", chatBody("classify document 7", 0, false))
	if said := wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonGenerationFailed); strings.Contains(said, "nothing was billed") || !strings.Contains(said, "may have generated it") {
		t.Fatalf("the replayed failure says %q", said)
	}
	w.generations(t, 1)
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key = 'doc-7'`); n != 1 {
		t.Fatalf("%d operations for the key, want 1", n)
	}
	// Once the key's TTL has passed, the key is free again.
	w.clock.Advance(25 * time.Hour)
	r, err = w.call("pipeline", "doc-7", chatBody("classify document 7", 0, false))
	completion(t, r, err)
	w.generations(t, 2)
}

// TestSameKeyInTwoTenantsAtOnceNeverJoins: two tenants send one Idempotency-Key at the same
// moment, each streaming its own question, and the second tenant retries on the key while
// both generations run. Each tenant's intent is its own (ops rule 2): two operations, two
// generations, and the retry follows its own tenant's generation live, never the other's
// running under the same key in this process.
func TestSameKeyInTwoTenantsAtOnceNeverJoins(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 20 * time.Millisecond})
	type ended struct {
		r   *reply
		err error
	}
	start := func(tenant, question string) chan ended {
		c := make(chan ended, 1)
		go func() {
			r, err := w.callOn(w.gw, "/v1/chat/completions", tenant, "at-once", chatBody(question, 0.2, true), "")
			c <- ended{r, err}
		}()
		return c
	}
	admitted := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); w.count(t, `SELECT count(*) FROM operations WHERE intent_key = 'at-once'`) < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d operations of the key after 10 s", n)
			}
		}
	}
	shop := start("shop", "what is the balance of account 1?")
	admitted(1)
	bank := start("bank", "list the payees of account 2")
	admitted(2)
	retry := start("bank", "list the payees of account 2")
	got := map[string]ended{"shop": <-shop, "bank": <-bank, "bank's retry": <-retry}
	texts := map[string]string{}
	for who, e := range got {
		if e.err != nil || !e.r.began {
			t.Fatalf("%s: %v", who, e.err)
		}
		text, _, done := streamText(t, e.r)
		if !done {
			t.Fatalf("%s's stream did not end", who)
		}
		texts[who] = text
	}
	w.generations(t, 2)
	s, b, r := got["shop"].r.head.OperationID, got["bank"].r.head.OperationID, got["bank's retry"].r.head.OperationID
	if s == b || r != b || texts["bank's retry"] != texts["bank"] || texts["shop"] == texts["bank"] {
		t.Fatalf("operations shop %s, bank %s, bank's retry %s; texts %q", s, b, r, texts)
	}
	if n := w.count(t, `SELECT count(DISTINCT tenant_id) FROM operations WHERE intent_key = 'at-once'`); n != 2 {
		t.Fatalf("the key's operations belong to %d tenants, want 2", n)
	}
}
