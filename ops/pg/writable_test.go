package pg_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// Writable tells a primary from a server that answers but takes no writes: a session set
// read-only, and a streaming standby until it is promoted.
func TestWritableTellsAPrimaryFromAStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := pgtest.New(t).Writable(ctx); err != nil {
		t.Fatalf("a primary: %v", err)
	}
	url, sep := pgtest.URL(pgtest.NewDatabase(t)), "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	ro, err := pg.Open(ctx, url+sep+"options=-c%20default_transaction_read_only%3Don")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Writable(ctx); !errors.Is(err, pg.ErrReadOnly) {
		t.Fatalf("a read-only session: %v, want ErrReadOnly", err)
	}

	dir, err := os.MkdirTemp(filepath.Join(pgtest.ProjectDir(), ".settle"), "writable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	primary, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "primary")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop(); os.RemoveAll(primary.Dir) })
	standby, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "standby"), StandbyOf: primary.URL("postgres")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop(); os.RemoveAll(standby.Dir) })
	db, err := pg.Open(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("the standby does not answer a ping: %v", err)
	}
	if err := db.Writable(ctx); !errors.Is(err, pg.ErrReadOnly) {
		t.Fatalf("a standby: %v, want ErrReadOnly", err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Writable(ctx); err != nil {
		t.Fatalf("the promoted standby: %v", err)
	}
}
