package pgtest

import (
	"context"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestDatabaseHasTheNewestSchema: a test's database is at the newest migration, whether its
// cluster was made from nothing or, under -short, copied from the cache.
func TestDatabaseHasTheNewestSchema(t *testing.T) {
	t.Parallel()
	if err := New(t).CheckSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestServerURLNeverRepeatsTheValue gives SETTLE_TEST_DATABASE_URL values that pgx refuses
// and that hold a secret: the refusal names the variable and repeats nothing of the value,
// which may hold a password.
func TestServerURLNeverRepeatsTheValue(t *testing.T) {
	for _, u := range []string{"postgres://settle:SECRET@127.0.0.1:bad/settle", "SECRET",
		"postgres://settle@127.0.0.1/settle?sslmode=SECRET", "host=127.0.0.1 password=SECRET port=bad"} {
		_, err := serverURL(u)
		switch {
		case err == nil:
			t.Errorf("%q was accepted", u)
		case strings.Contains(err.Error(), "SECRET"):
			t.Errorf("%q: the refusal repeats the value: %v", u, err)
		case !strings.Contains(err.Error(), "SETTLE_TEST_DATABASE_URL"):
			t.Errorf("%q: the refusal does not name the variable: %v", u, err)
		}
	}
	got, err := serverURL("postgres://settle@127.0.0.1:5432/settle?sslmode=disable")
	if err != nil || got != "postgres://settle@127.0.0.1:5432/{db}?sslmode=disable" {
		t.Fatalf("serverURL = %q, %v; want the database replaced by {db}", got, err)
	}
}
