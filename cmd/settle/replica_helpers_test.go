package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
)

// replica is one 'settle serve' process of a test, named by its SETTLE_WORKER_ID.
type replica struct {
	name, addr string
	cmd        *exec.Cmd
	out        *lockedBuffer
	exited     chan struct{}
}

// startReplica starts 'settle serve' on a free loopback port with env added to the test's
// environment, waits until it answers /healthz, and kills it when the test ends.
func startReplica(t *testing.T, name string, args []string, env ...string) *replica {
	t.Helper()
	bin := buildSettle(t)
	r := &replica{name: name, addr: freeAddr(t), out: &lockedBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"serve", "--addr", r.addr}, args...)...)
	r.cmd.Env = append(os.Environ(), "SETTLE_WORKER_ID="+name, "SETTLE_LOG_LEVEL=info")
	r.cmd.Env = append(r.cmd.Env, env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start replica %s: %v", name, err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		// Stop what the test started, by its own pid.
		_ = r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			t.Logf("replica %s:\n%s", r.name, r.out)
		}
	})
	return r
}

// waitHealthy waits until every replica answers /healthz.
func waitHealthy(t *testing.T, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		for i := 0; ; i++ {
			resp, err := http.Get(r.url() + "/healthz")
			if err == nil {
				resp.Body.Close()
				break
			}
			select {
			case <-r.exited:
				t.Fatalf("replica %s exited at start:\n%s", r.name, r.out)
			default:
			}
			if i == 600 {
				t.Fatalf("replica %s did not answer in 30 s: %v\n%s", r.name, err, r.out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (r *replica) url() string { return "http://" + r.addr }

// kill ends the replica as a crash would: SIGKILL, nothing flushed, nothing released.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill replica %s: %v", r.name, err)
	}
	<-r.exited
}

func (r *replica) alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

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
