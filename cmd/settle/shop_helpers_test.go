package main

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// shopDatabase gives t a fresh database holding tenant "shop" and one API token of it named
// name, and returns the database, its URL and the token: where the command tests that
// refund or serve as the shop begin.
func shopDatabase(t *testing.T, name string) (*pg.DB, string, string) {
	t.Helper()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, name)
	if err != nil {
		t.Fatal(err)
	}
	return db, url, token
}

// shopStripe starts a fake Stripe holding the shop's payment pi_4417 (3800 usd), stopped when
// t ends, and returns it with its base URL.
func shopStripe(t *testing.T) (*fake.Stripe, string) {
	t.Helper()
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fk.Close() })
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	return fk, base
}
