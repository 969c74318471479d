package localpg_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/localpg"
)

// projectTemp returns a fresh folder under the project's gitignored .settle folder.
func projectTemp(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs("../../..")
	base := filepath.Join(root, ".settle")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "cluster")
}

func TestClusterStartsStopsAndKeepsItsData(t *testing.T) {
	ctx := context.Background()
	dir := projectTemp(t)
	c, err := localpg.Start(ctx, localpg.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// As root the cluster may live outside dir (the postgres user cannot reach it): remove
	// the folder it really used.
	t.Cleanup(func() { os.RemoveAll(c.Dir) })
	if !strings.HasPrefix(c.URL("postgres"), "postgres://postgres@127.0.0.1:") {
		t.Fatalf("URL %s is not on loopback", c.URL("postgres"))
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	var listen string
	_ = conn.QueryRow(ctx, `SHOW listen_addresses`).Scan(&listen)
	conn.Close(ctx)
	if listen != "127.0.0.1" {
		t.Fatalf("listens on %q", listen)
	}
	sock := c.SocketDir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket folder %s left behind", sock)
	}
	if _, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
		t.Fatal("the server still answers after Stop")
	}

	// A second start reuses the cluster and its data.
	c2, err := localpg.Start(ctx, localpg.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	conn, err = pgx.Connect(ctx, c2.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after restart: %d %v", v, err)
	}
}

func TestBadServerFolderIsNamed(t *testing.T) {
	t.Setenv("SETTLE_PG_BIN", "/nonexistent/bin")
	_, err := localpg.FindBin()
	if err == nil || !strings.Contains(err.Error(), "SETTLE_PG_BIN=/nonexistent/bin") {
		t.Fatalf("err %v", err)
	}
}
