package pg_test

import (
	"context"
	"testing"
)

// Migration 00077 makes the provider's (provider, charge_ref) the primary key of
// provider_charges in place of the id, which no reader addressed a charge by, so a charge
// takes one index entry fewer and the table keeps a primary key. Its Down puts the id's
// key back over the charges recorded meanwhile: the identity column kept every id unique.
func TestTheChargesPrimaryKeyMigrationGoesBothWays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	keyed := func(want string) {
		t.Helper()
		var cols string
		if err := f.db.Pool.QueryRow(ctx, `SELECT string_agg(a.attname, ',' ORDER BY k.ord)
FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, ord), pg_attribute a
WHERE c.conrelid = 'provider_charges'::regclass AND c.contype = 'p'
	AND a.attrelid = c.conrelid AND a.attnum = k.attnum`).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		if cols != want {
			t.Fatalf("provider_charges' primary key is (%s), want (%s)", cols, want)
		}
		if n := f.count(t, `SELECT count(*) FROM pg_index WHERE indrelid = 'provider_charges'::regclass`); n != 4 {
			t.Fatalf("provider_charges has %d indexes, want 4 (the primary key, the operation's, the seen and the orphans')", n)
		}
	}
	keyed("provider,charge_ref")
	f.lifecycle(t, "ord-pkey-1")
	if err := f.db.MigrateDownTo(ctx, 76); err != nil {
		t.Fatal(err)
	}
	f.lifecycle(t, "ord-pkey-2")
	if n := f.count(t, `SELECT count(*) FROM pg_index WHERE indrelid = 'provider_charges'::regclass AND indisunique`); n != 2 {
		t.Fatalf("after Down provider_charges has %d unique indexes, want 2 (the id's and the provider's key)", n)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keyed("provider,charge_ref")
	f.lifecycle(t, "ord-pkey-3")
	if n := f.count(t, `SELECT count(DISTINCT id) FROM provider_charges`); n != 3 {
		t.Errorf("three lifecycles recorded %d distinct charge ids, want 3", n)
	}
}
