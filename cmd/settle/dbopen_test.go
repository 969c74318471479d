package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestADatabaseThatNeverAnswersFailsFast: a DATABASE_URL whose host takes the connection and
// never answers (a hung server, a half-open firewall, the wrong port of a busy machine) held
// 'token list', 'migrate', 'reconcile' and the other commands forever when the URL set no
// connect_timeout. A command gives up after dbOpenTimeout, in one line naming the server,
// with exit 1.
func TestADatabaseThatNeverAnswersFailsFast(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered, until the test ends
		}
	}()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		code, stdout, stderr := run(t, []string{"token", "list"}, map[string]string{"DATABASE_URL": "postgres://u@" + ln.Addr().String() + "/db"}, "")
		done <- result{code, stdout, stderr}
	}()
	select {
	case r := <-done:
		if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, ln.Addr().String()) || !strings.Contains(r.stderr, "did not answer") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line saying the database at %s did not answer", r.code, r.stdout, r.stderr, ln.Addr())
		}
		if took := time.Since(start); took > dbOpenTimeout+5*time.Second {
			t.Errorf("gave up after %s; want about %s", took, dbOpenTimeout)
		}
	case <-time.After(dbOpenTimeout + 20*time.Second):
		t.Fatalf("'settle token list' still waits for a database that never answers after %s", time.Since(start))
	}
}

// TestADatabaseThatRefusesIsOneReadableLine: a command whose database cannot be opened said so
// in one line, but that line was pgx's chain of its attempts, each said twice (once with
// TLS, once without), with SQLSTATE codes and "failed to connect to `user=…`". It is one
// short line naming the server and the reason, with exit 1.
func TestADatabaseThatRefusesIsOneReadableLine(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()            // nothing listens there now
	pgtest.NewDatabase(t) // starts the test cluster
	missing := pgtest.URL("no_such_database")
	c, err := pgx.ParseConfig(missing)
	if err != nil {
		t.Fatal(err)
	}
	server := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	for url, want := range map[string]string{
		"postgres://u@" + closed + "/db": "settle: the database at " + closed + " is unreachable: connect: connection refused\n",
		missing:                          "settle: the database at " + server + " refused the connection: database \"no_such_database\" does not exist\n",
	} {
		code, stdout, stderr := run(t, []string{"token", "list"}, map[string]string{"DATABASE_URL": url}, "")
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("DATABASE_URL=%s: exit %d, stdout %q, stderr %q; want 1 and %q", url, code, stdout, stderr, want)
		}
	}
}
