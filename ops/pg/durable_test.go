package pg_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// durableDB starts a durable cluster of the test's own, migrated, where each waited-for
// commit is one fdatasync (pg_stat_wal.wal_sync), unlike the tests' shared cluster, which
// flushes nothing. It returns the store on one connection, so the writes and the reads of
// their statistics share a backend, which sends its statistics when told to, and the id of
// the tenant "acme".
func durableDB(ctx context.Context, t *testing.T, prefix string) (*pg.DB, int64) {
	t.Helper()
	root := filepath.Join(pgtest.ProjectDir(), ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, prefix)
	if err != nil {
		t.Fatal(err)
	}
	c, err := localpg.Start(ctx, localpg.Options{Dir: dir, Durable: true})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start a durable postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Stop()
		os.RemoveAll(dir)
	})
	mig, err := pg.Open(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	err = mig.Migrate(ctx)
	mig.Close()
	if err != nil {
		t.Fatal(err)
	}
	return openWithTenant(ctx, t, c.URL("postgres")+"&pool_max_conns=1", pg.PreparedWhenDirect())
}

// withParams adds connection parameters (a=b&c=d) to url, whether or not it has some.
func withParams(url, params string) string {
	if strings.Contains(url, "?") {
		return url + "&" + params
	}
	return url + "?" + params
}

// openWithTenant opens url with opts for the test's life and creates the tenant acme on it,
// returning its id.
func openWithTenant(ctx context.Context, t *testing.T, url string, opts ...pg.Option) (*pg.DB, int64) {
	t.Helper()
	db, err := pg.Open(ctx, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	return db, tenant
}
