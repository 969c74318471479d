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

// A standby made from a primary's base backup streams its commits, refuses writes, and once
// the primary is stopped as by a crash and the standby promoted, takes writes with every
// commit the primary acknowledged under synchronous replication.
func TestStandbyFollowsAndTakesOverWhenPromoted(t *testing.T) {
	ctx := context.Background()
	primary, err := localpg.Start(ctx, localpg.Options{Dir: projectTemp(t),
		Settings: map[string]string{"synchronous_standby_names": "standby1", "synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop(); os.RemoveAll(primary.Dir) })
	standby, err := localpg.Start(ctx, localpg.Options{Dir: projectTemp(t),
		StandbyOf: primary.URL("postgres") + "&application_name=standby1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop(); os.RemoveAll(standby.Dir) })
	if standby.Port == primary.Port || standby.Dir == primary.Dir {
		t.Fatalf("the standby shares the primary's port or folder: %d %s", standby.Port, standby.Dir)
	}

	pc, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if err := primary.WaitSynchronous(ctx, "standby1"); err != nil {
		t.Fatal(err)
	}
	// Acknowledged under synchronous replication: on the standby before the primary dies.
	if _, err := pc.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	sc, err := pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	// A write that does not depend on the standby having replayed kept yet: synchronous
	// commit waits for the standby to flush the primary's WAL, not to apply it.
	if _, err := sc.Exec(ctx, `CREATE TABLE refused (v int)`); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a write on the standby: %v; want refused as read-only", err)
	}
	sc.Close(ctx)

	if err := primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, primary.URL("postgres")); err == nil {
		t.Fatal("the primary still answers after StopImmediate")
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err = pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var sum int
	if _, err := sc.Exec(ctx, `INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatalf("a write on the promoted standby: %v", err)
	}
	if err := sc.QueryRow(ctx, `SELECT sum(v) FROM kept`).Scan(&sum); err != nil || sum != 43 {
		t.Fatalf("after promotion kept sums to %d (%v), want 43", sum, err)
	}
}
