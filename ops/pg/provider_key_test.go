package pg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// providerKeyIndexes returns the indexes of operations over provider_key, in a predicate or
// in a column: those an operation's key could cost an entry in.
func (f *fixture) providerKeyIndexes(t *testing.T) []string {
	t.Helper()
	rows, err := f.db.Pool.Query(context.Background(), `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'operations'::regclass AND pg_get_indexdef(i.indexrelid) LIKE '%provider_key%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	return out
}

// TestANewOperationsProviderKeyIsItsIDAndCostsNoIndexEntry: the key an operation is opened
// with is its id's, committed with it and sent by its attempt (ops rule 1), so it is unique
// because the id is and needs no index of its own: neither the operation's insert nor its
// close lands in any index over provider_key.
func TestANewOperationsProviderKeyIsItsIDAndCostsNoIndexEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	keyed := f.providerKeyIndexes(t)
	if len(keyed) == 0 {
		t.Fatal("no index over provider_key: the legacy keys' uniqueness is unguarded")
	}
	r, err := f.seed().Open(ctx, f.refund("pkey-1", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	if want := "settle_" + r.Op.ID; r.Op.ProviderKey != want || r.Attempt == nil || r.Attempt.ProviderKey != want {
		t.Fatalf("opened with key %q, attempt %+v, want %q for both", r.Op.ProviderKey, r.Attempt, want)
	}
	var stored string
	if err := f.db.Pool.QueryRow(ctx, `SELECT provider_key FROM operations WHERE id = $1`, r.Op.ID).Scan(&stored); err != nil || stored != r.Op.ProviderKey {
		t.Fatalf("stored key %q (%v), want %q", stored, err, r.Op.ProviderKey)
	}
	landed := func(what string) {
		t.Helper()
		for _, ix := range f.indexesHolding(t, "operations", "id = '"+r.Op.ID+"'") {
			if slices.Contains(keyed, ix) {
				t.Errorf("%s takes an entry in %s", what, ix)
			}
		}
	}
	landed("the insert")
	if _, err := f.seed().Finish(ctx, r.Op, r.Attempt, "w", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "re_pkey_1"}}); err != nil {
		t.Fatal(err)
	}
	landed("the close")
}

// TestTwoOperationsNeverShareAProviderKey: one key, one operation, across all tenants
// (ops rule 3). A key derived from an id is unique because the id is; the store writes no
// other for a new operation, so an opening that names another operation's key still gets its own.
// The keys of operations opened before keys were derived stay unique through their index.
func TestTwoOperationsNeverShareAProviderKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first, err := f.seed().Open(ctx, f.refund("pkey-first", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	forged := &ops.Operation{ID: ops.NewOperationID(), TenantID: f.tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: "pkey-forged", ProviderKey: first.Op.ProviderKey, Fingerprint: "fp", Retention: 24 * time.Hour}
	o, err := f.db.Open(ctx, ops.OpenParams{Op: forged, Now: t0, Claim: "w", LeaseUntil: t0.Add(time.Minute), Actor: "w"})
	if err != nil {
		t.Fatalf("an opening naming another operation's key: %v", err)
	}
	if o.Op.ProviderKey != "settle_"+forged.ID || o.Attempt.ProviderKey != o.Op.ProviderKey {
		t.Fatalf("an opening naming %s's key was stored with %q and attempted with %q, want its own id's",
			first.Op.ID, o.Op.ProviderKey, o.Attempt.ProviderKey)
	}
	if n := f.count(t, `SELECT count(*) FROM operations GROUP BY provider_key ORDER BY 1 DESC LIMIT 1`); n != 1 {
		t.Fatalf("%d operations share a key", n)
	}

	legacy := func(id string) error {
		_, err := f.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	status, created_at, updated_at) VALUES ($1, $2, 'refund', 'stripe', $3, 'settle_0123456789abcdef0123456789abcdef', 'fp', 'unknown', $4, $4)`,
			id, f.tenant, "legacy-"+id, t0)
		return err
	}
	if err := legacy(ops.NewOperationID()); err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	if err := legacy(ops.NewOperationID()); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a second operation with a legacy key: %v, want a unique violation", err)
	}
}

// TestAProviderKeyIsLookedUpOnAnIndex: a key derived from an id is looked up on the primary
// key, and an older operation's random key on the partial index of such keys, whose
// predicate the lookup repeats: neither reads the table.
func TestAProviderKeyIsLookedUpOnAnIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for key, want := range map[string]string{
		ops.ProviderKeyFor(ops.NewOperationID()): "operations_pkey",
		ops.NewProviderKey():                     "operations_provider_key_legacy_idx",
	} {
		args := pgx.NamedArgs{}
		plan := pgtest.PlanWithoutSeqScan(t, f.db, `SELECT id FROM operations o WHERE `+pg.ProviderKeyMatch(key, "key", args), args)
		if !strings.Contains(plan, want) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("key %s is not looked up on %s:\n%s", key, want, plan)
		}
	}
}

// Migration 00075 keeps the keys of the operations opened before it unique, in an index
// that holds them alone, and its Down puts the unique constraint over every key back.
func TestTheProviderKeyMigrationKeepsTheOlderKeysUnique(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 74); err != nil {
		t.Fatal(err)
	}
	older := ops.NewOperationID()
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	status, created_at, updated_at) VALUES ($1, $2, 'refund', 'stripe', 'older', $3, 'fp', 'unknown', $4, $4)`,
		older, f.tenant, ops.NewProviderKey(), t0); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	newer, err := f.seed().Open(ctx, f.refund("newer", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.providerKeyIndexes(t); !slices.Equal(got, []string{"operations_provider_key_legacy_idx"}) {
		t.Fatalf("indexes over provider_key after the migration: %v", got)
	}
	if got := f.indexesHolding(t, "operations", "id = '"+older+"'"); !slices.Contains(got, "operations_provider_key_legacy_idx") {
		t.Errorf("the older operation's key is in none of %v", got)
	}
	if got := f.indexesHolding(t, "operations", "id = '"+newer.Op.ID+"'"); slices.Contains(got, "operations_provider_key_legacy_idx") {
		t.Errorf("a new operation's key is in the older keys' index")
	}
	if err := f.db.MigrateDownTo(ctx, 74); err != nil {
		t.Fatal(err)
	}
	if got := f.providerKeyIndexes(t); !slices.Equal(got, []string{"operations_provider_key_key"}) {
		t.Fatalf("indexes over provider_key after Down: %v", got)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
