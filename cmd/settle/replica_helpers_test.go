package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/ops/pg"
)

// replica is one 'settle serve' process of a test, named by its SETTLE_WORKER_ID.
type replica struct {
	name, addr string
	p          *proctest.Proc
}

// startReplica starts 'settle serve' on a free loopback port with env added to the test's
// environment; it is killed when the test ends.
func startReplica(t *testing.T, name string, args []string, env ...string) *replica {
	t.Helper()
	r := &replica{name: name, addr: proctest.FreeAddr(t)}
	cmd := exec.Command(settleBinary.Path(t), append([]string{"serve", "--addr", r.addr}, args...)...)
	cmd.Env = append(os.Environ(), "SETTLE_WORKER_ID="+name, "SETTLE_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	r.p = proctest.Start(t, "replica "+name, cmd)
	return r
}

// waitHealthy waits until every replica answers /healthz.
func waitHealthy(t *testing.T, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		r.p.WaitHTTP(t, r.url()+"/healthz", 30*time.Second)
	}
}

func (r *replica) url() string { return "http://" + r.addr }

// kill ends the replica as a crash would: SIGKILL, nothing flushed, nothing released.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	r.p.Kill(t)
}

func (r *replica) alive() bool { return r.p.Alive() }

// leaseRow is a lease as the database holds it: its holder and until when; until is nil
// when nobody holds it.
type leaseRow struct {
	owner string
	until *time.Time
}

// readLease reads the named row of the leases table.
func readLease(t *testing.T, db *pg.DB, name string) leaseRow {
	t.Helper()
	var l leaseRow
	err := db.Pool.QueryRow(context.Background(), `SELECT owner, CASE WHEN expires_at > '-infinity' THEN expires_at END
FROM leases WHERE name = $1`, name).Scan(&l.owner, &l.until)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("read lease %s: %v", name, err)
	}
	return l
}

// holderOf is the replica a lease owner names: owners are "<role>:<worker id>", with a
// "#<run token>" after it for the reconciler.
func holderOf(rs []*replica, owner string) *replica {
	_, id, _ := strings.Cut(owner, ":")
	id, _, _ = strings.Cut(id, "#")
	for _, r := range rs {
		if r.name == id {
			return r
		}
	}
	return nil
}

// waitFor polls cond every 50 ms for up to within and returns how long it took; it fails
// the test with what, when cond never held.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}
