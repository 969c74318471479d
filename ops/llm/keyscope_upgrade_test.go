package llm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// legacyUserKey is the intent key the user scope used to keep: a 48-bit, unsalted hash of
// the user before the client's key. Operations opened before the upgrade carry it.
func legacyUserKey(user, key string) string {
	sum := sha256.Sum256([]byte(user))
	return "user:" + hex.EncodeToString(sum[:6]) + ":" + key
}

// asLegacy rewrites the user-scoped operations of tenant shop for key whose end user is
// owner to the legacy key of as: what the earlier version stored (as == owner), or what it
// stored when owner's 48-bit hash collided with as's (as != owner).
func (w *gatewayWorld) asLegacy(t *testing.T, owner, as, key string) {
	t.Helper()
	tag, err := w.db.Pool.Exec(context.Background(), `UPDATE operations SET intent_key = $1
		WHERE tenant_id = $2 AND kind = 'llm_call' AND customer_ref = $3 AND intent_key LIKE 'user:%:' || $4`,
		legacyUserKey(as, key), w.tenants["shop"].ID, owner, key)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("rewrite %s's operation of %s to the legacy key: %v (%d rows)", owner, key, err, tag.RowsAffected())
	}
}

// An end user's retry that arrives after the upgrade, for an operation opened before it
// under the legacy key, is that operation's repeat: replayed, the provider called once
// (ops rules 1, 2 and 3: one paid call per intent across a deploy). Once the key's TTL has passed the
// legacy operation answers nothing and the key opens a new one under the new form.
func TestUserScopeUpgradeReplaysAnOperationOpenedUnderTheLegacyKey(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{keyScopes: map[string]llm.KeyScope{"shop": llm.ScopeUser}})
	const alice = "alice@example.com"
	body := chatBody("what is my balance?", 0.2, false, alice)
	r, err := w.call("shop", "msg-1", body)
	first, _ := completion(t, r, err)
	w.asLegacy(t, alice, alice, "msg-1")

	r, err = w.call("shop", "msg-1", body)
	if again, _ := completion(t, r, err); again != first || !r.head.Replayed {
		t.Fatalf("alice's retry after the upgrade answered %s (replayed %v), want %s replayed", again, r.head.Replayed, first)
	}
	w.generations(t, 1)
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key LIKE 'user:%:msg-1'`); n != 1 {
		t.Fatalf("%d operations of msg-1, want the legacy one only", n)
	}

	w.clock.Advance(25 * time.Hour)
	r, err = w.call("shop", "msg-1", body)
	if later, _ := completion(t, r, err); later == first || r.head.Replayed {
		t.Fatalf("after the key's TTL the key answered %s (replayed %v), want a new generation", later, r.head.Replayed)
	}
	w.generations(t, 2)
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key = $1`, legacyUserKey(alice, "msg-1")); n != 1 {
		t.Fatalf("%d operations under the legacy key, want the old one only: a new one takes the new form", n)
	}
}

// An operation left open under the legacy key (its outcome unknown: the provider billed and
// the answer was lost) holds the intent after the upgrade: the end user's retry is told the
// outcome is being checked and nothing is sent again (ops rules 2 and 11).
func TestUserScopeUpgradeJoinsAnOpenLegacyOperation(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{attemptTimeout: 300 * time.Millisecond,
		modes: map[string]llm.Mode{"shop": llm.Batch}, keyScopes: map[string]llm.KeyScope{"shop": llm.ScopeUser}})
	const alice = "alice@example.com"
	body := chatBody("summarise my statement", 0, false, alice)
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	r, err := w.call("shop", "msg-2", body)
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	w.asLegacy(t, alice, alice, "msg-2")

	r, err = w.call("shop", "msg-2", body)
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown)
	w.generations(t, 1)
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key LIKE 'user:%:msg-2'`); n != 1 {
		t.Fatalf("%d operations of msg-2, want the open legacy one only", n)
	}
}

// The legacy lookup does not reopen the collision it replaces: an operation found under a
// user's legacy key that another end user opened (their 48-bit hashes collide, built here by
// rewriting the key) is not that user's, and answers them nothing of it.
func TestUserScopeUpgradeIgnoresAnotherUsersLegacyOperation(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{keyScopes: map[string]llm.KeyScope{"shop": llm.ScopeUser}})
	const alice, mallory = "alice@example.com", "mallory@example.com"
	r, err := w.call("shop", "msg-3", chatBody("what is my balance?", 0.2, false, alice))
	victim, _ := completion(t, r, err)
	w.asLegacy(t, alice, mallory, "msg-3")

	r, err = w.call("shop", "msg-3", chatBody("what is my balance?", 0.2, false, mallory))
	if got, _ := completion(t, r, err); got == victim || r.head.Replayed {
		t.Fatalf("mallory, whose legacy hash collides with alice's, was answered %s (replayed %v): alice's completion", got, r.head.Replayed)
	}
	w.generations(t, 2)
}
