package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
)

// findPgbouncer returns the pgbouncer program. Tests never install it (`make deps` does):
// when it is missing the test skips, or fails under SETTLE_TEST_STRICT=1.
func findPgbouncer(t *testing.T) string {
	t.Helper()
	testtool.Heavy(t, "pgbouncer")
	return testtool.Need(t, "pgbouncer", "sudo apt-get install -y pgbouncer (or make deps)", "/usr/sbin")
}

// pgbouncer is a pgbouncer process of a test, in front of one database.
type pgbouncer struct {
	port int
	conf string // its configuration file
}

// startPgbouncer runs pgbouncer on a free loopback port in transaction mode, with
// serverPool server connections, in front of the database dsn names, with settings (lines
// such as "server_login_retry = 1") added to its configuration; it stops with the test. It
// runs as the postgres user when the test runs as root, since pgbouncer refuses root.
func startPgbouncer(t *testing.T, dsn string, serverPool int, settings ...string) *pgbouncer {
	t.Helper()
	bin := findPgbouncer(t)
	target, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &pgbouncer{port: proctest.FreePort(t)}
	// auth_type any: the loopback cluster trusts its clients, and the admin console
	// (database pgbouncer) lets the test read the pools.
	conf := fmt.Sprintf(`[databases]
settle = host=%s port=%d dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
`, target.Host, target.Port, target.Database, target.User, b.port, serverPool)
	for _, s := range settings {
		conf += s + "\n"
	}
	b.conf = filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(b.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, b.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = postgresUser(t)
	}
	proctest.Start(t, "pgbouncer", cmd).WaitDial(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)), 10*time.Second)
	return b
}

// URL is the connection string of the database behind the pooler.
func (b *pgbouncer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/settle?sslmode=disable", b.port)
}

// show runs a SHOW command on the admin console and returns its rows by column name.
func (b *pgbouncer) show(t *testing.T, what string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	// The admin console speaks the simple protocol only.
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol", b.port))
	if err != nil {
		t.Fatalf("pgbouncer admin console: %v", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SHOW "+what)
	if err != nil {
		t.Fatalf("SHOW %s: %v", what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil {
		t.Fatalf("SHOW %s: %v", what, err)
	}
	return out
}

func postgresUser(t *testing.T) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgbouncer refuses root and there is no postgres user to run it (install the Debian package postgresql): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
