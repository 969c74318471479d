package deskstore_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
)

// TestTheQueueFindsAnOperationByItsProviderKey: a person who has only the idempotency key a
// provider shows (a Stripe request's log) finds its operation in the queue, whether the key
// is derived from the operation's id, as every new operation's is, or is the random key of
// an operation opened before; and a key finds only the operation that carries it, not the
// one whose id a derived key names when that one carries another (ops rule 3: one key, one
// operation).
func TestTheQueueFindsAnOperationByItsProviderKey(t *testing.T) {
	t.Parallel()
	w := pgworld.New(t)
	ctx := context.Background()
	s := deskstore.New(w.DB)
	derived, err := w.Seed().Open(ctx, w.Refund("pkey-derived", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	legacyID, legacyKey := ops.NewOperationID(), ops.NewProviderKey()
	if _, err := w.DB.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	status, created_at, updated_at) VALUES ($1, $2, 'refund', 'stripe', 'pkey-legacy', $3, 'fp', 'unknown', $4, $4)`,
		legacyID, w.Tenant, legacyKey, pgworld.T0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status ops.Status
		search string
		want   string
	}{
		{ops.StatusInProgress, derived.Op.ProviderKey, derived.Op.ID},
		{ops.StatusUnknown, legacyKey, legacyID},
		{ops.StatusUnknown, ops.ProviderKeyFor(legacyID), ""},
		{ops.StatusInProgress, ops.NewProviderKey(), ""},
	} {
		f := desk.QueueFilter{Status: c.status, Search: c.search, Now: pgworld.T0}
		page, err := s.ListQueue(ctx, f, pgworld.T0)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if len(page.Ops) == 1 {
			got = page.Ops[0].ID
		}
		if len(page.Ops) > 1 || got != c.want {
			t.Errorf("the %s queue searched for %s lists %d operations (%q), want %q", c.status, c.search, len(page.Ops), got, c.want)
		}
		counts, err := s.QueueCounts(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if n := counts[c.status]; n != int64(len(page.Ops)) {
			t.Errorf("the %s queue searched for %s counts %d, lists %d", c.status, c.search, n, len(page.Ops))
		}
	}
}
