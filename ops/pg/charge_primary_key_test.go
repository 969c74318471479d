package pg_test

import (
	"context"
	"testing"
)

// Migration 00077 drops the primary key of provider_charges, which no reader used, and its
// Down puts it back over the charges recorded meanwhile: the identity column kept every id
// unique.
func TestTheChargesPrimaryKeyMigrationGoesBothWays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	primary := func() int {
		return f.count(t, `SELECT count(*) FROM pg_constraint WHERE conrelid = 'provider_charges'::regclass AND contype = 'p'`)
	}
	if n := primary(); n != 0 {
		t.Fatalf("provider_charges has %d primary keys after the migrations, want none", n)
	}
	f.lifecycle(t, "ord-pkey-1")
	if err := f.db.MigrateDownTo(ctx, 76); err != nil {
		t.Fatal(err)
	}
	if n := primary(); n != 1 {
		t.Fatalf("provider_charges has %d primary keys after Down, want one", n)
	}
	f.lifecycle(t, "ord-pkey-2")
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := primary(); n != 0 {
		t.Fatalf("provider_charges has %d primary keys after Up again, want none", n)
	}
	f.lifecycle(t, "ord-pkey-3")
	if n := f.count(t, `SELECT count(DISTINCT id) FROM provider_charges`); n != 3 {
		t.Errorf("three lifecycles recorded %d distinct charge ids, want 3", n)
	}
}
