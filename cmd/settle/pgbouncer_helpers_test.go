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
	out  *lockedBuffer
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
	_, port, _ := net.SplitHostPort(freeAddr(t))
	b := &pgbouncer{out: &lockedBuffer{}}
	b.port, _ = strconv.Atoi(port)
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
	cmd.Stdout, cmd.Stderr = b.out, b.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = postgresUser(t)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("pgbouncer:\n%s", b.out)
		}
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
		if err == nil {
			c.Close()
			return b
		}
		if i == 200 {
			t.Fatalf("pgbouncer did not listen in 10 s: %v\n%s", err, b.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
