package testworld

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// The LLM gateway's tests, those of ops/llm calling the gateway and those of web calling it
// over HTTP, look at the same things afterwards: the rows the gateway wrote and what the
// fake provider generated. The helpers take the test's own t rather than the world's, so a
// subtest that fails stops itself and not the test that made the world.

// GatewayLedger is the ledger a test's gateway runs on: every kind registered, backoffs
// short enough for a test, and on clock unless lease is set, when it runs on the wall clock
// with that lease (a lease must expire in real time for another process to take over).
func (w *World) GatewayLedger(clock ops.Clock, lease time.Duration) *ops.Ledger {
	if lease > 0 {
		clock = ops.SystemClock{}
	}
	ledger := w.Ledger(clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	if lease > 0 {
		ledger.Limits.Lease = lease
	}
	return ledger
}

// Count is the one integer that q, a count over the world's database, returns.
func (w *World) Count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := w.DB.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// Operation is the latest operation of key, of any tenant.
func (w *World) Operation(t testing.TB, key string) *ops.Operation {
	t.Helper()
	var id string
	if err := w.DB.Pool.QueryRow(context.Background(), `SELECT id::text FROM operations WHERE intent_key = $1 ORDER BY created_at DESC LIMIT 1`, key).Scan(&id); err != nil {
		t.Fatalf("operation of key %s: %v", key, err)
	}
	op, err := w.DB.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// WaitStatus polls until the key's operation reaches status, failing the test after within:
// the generation runs on after a client leaves, so the end is seen later than the answer.
func (w *World) WaitStatus(t testing.TB, key string, status ops.Status, within time.Duration) *ops.Operation {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		op := w.Operation(t, key)
		if op.Status == status {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s is %s, want %s", op.ID, op.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitAdmitted polls until a request with key has opened its operation, so that a request
// sent next finds the key taken however slow the machine is.
func (w *World) WaitAdmitted(t testing.TB, key string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); w.Count(t, `SELECT count(*) FROM operations WHERE intent_key = $1`, key) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no operation of key %s after 10 s", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Generations is what the fake provider generated, failing the test unless it billed want
// generations: each one is a paid side effect, so a second one for one intent is the bug
// these tests look for (ops rule 3).
func Generations(t testing.TB, f *fake.LLM, want int) []fake.Generation {
	t.Helper()
	g := f.Generations()
	if len(g) != want {
		t.Fatalf("the provider billed %d generations, want %d", len(g), want)
	}
	return g
}
