package ops

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// ProviderKeyPrefix begins every provider key Settle makes.
const ProviderKeyPrefix = "settle_"

// ProviderKeyFor returns the idempotency key the provider is sent for the operation with
// the given id: the prefix and the id as the store writes it (lowercase, with its dashes).
// The id is made by the server (NewOperationID), never taken from a client, and it is the
// operation's primary key, so no two operations, of one tenant or of two, share a key
// (rule 3), and the key needs no unique index of its own: an operation's insert and
// close take no entry for it. Knowing an operation's id, as its tenant does, gives its key,
// and that is safe: the key matters only at the provider, which Settle calls with its own
// credentials and which scopes a key to the account that sent it, so nobody but Settle can
// send a request under it. Operations opened before keys were derived carry a random key
// (NewProviderKey's form, with no dashes), which is never the form of a derived one.
func ProviderKeyFor(id string) string { return ProviderKeyPrefix + id }

// ProviderKeyOperation returns the id a derived provider key was made from, and false for
// anything else (a random key of an older operation, a typo), so that an operation found
// by its key is found by its id.
func ProviderKeyOperation(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, ProviderKeyPrefix)
	if !ok || len(rest) != 36 {
		return "", false
	}
	u, err := uuid.Parse(rest)
	if err != nil || u.String() != rest {
		return "", false
	}
	return rest, true
}

// NewProviderKey returns a random key of the form operations carried before keys were
// derived from their ids: the prefix and 32 hex digits, no dashes. No new operation takes
// one (the store writes ProviderKeyFor of the id whatever key an opening names); it makes
// the keys of rows that stand for older operations.
func NewProviderKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return ProviderKeyPrefix + hex.EncodeToString(b[:])
}
