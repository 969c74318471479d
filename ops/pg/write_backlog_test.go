package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
)

// While a group-commit batch waits at the server (a transaction of the test's own locks
// the operations table against writes), the next admission waits for a batch, and
// WriteBacklog reports how long it has waited, growing; once the lock goes and every write
// is done, it is 0 again. The web shedder reads it to refuse API requests before they
// record anything (ops rule 8: a request shed before it names its tenant is counted by the
// server's metrics, not the ledger).
func TestWriteBacklogIsTheOldestWaitingStatementsWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if got := f.db.WriteBacklog(); got != 0 {
		t.Fatalf("WriteBacklog with nothing written: %v, want 0", got)
	}
	// A lone statement behind a batch at the server waits for it (ops/pg/group.go), here
	// without the bound that would send it out on its own after a few milliseconds.
	pg.SetLoneWait(f.db, time.Minute)
	tx := lockOperations(t, f)
	// One admission at a time: the first takes a flusher and stalls at the server, and the
	// next stays in the queue.
	done := make(chan error, 5)
	admitted := 0
	for f.db.WriteBacklog() == 0 {
		if admitted == cap(done) {
			t.Fatalf("%d admissions stalled behind the lock and none waits for a batch", admitted)
		}
		go func(i int) {
			_, err := f.ledger.Admit(ctx, request(f.refund(fmt.Sprintf("ord-%d", i), 100), fmt.Sprintf("req-%d", i), "w"))
			done <- err
		}(admitted)
		admitted++
		for deadline := time.Now().Add(300 * time.Millisecond); f.db.WriteBacklog() == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := f.db.WriteBacklog()
	time.Sleep(30 * time.Millisecond)
	if got := f.db.WriteBacklog(); got < first+25*time.Millisecond || got < 25*time.Millisecond {
		t.Errorf("WriteBacklog 30 ms after %v: %v, want it to grow with the wait", first, got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range admitted {
		if err := <-done; err != nil {
			t.Fatalf("an admission behind the lock: %v", err)
		}
	}
	if got := f.db.WriteBacklog(); got != 0 {
		t.Errorf("WriteBacklog after every write is done: %v, want 0", got)
	}
}

// With group commit off each write goes to the pool on its own and waits in no queue of
// Settle's, so WriteBacklog reports 0 even while writes stall at the server.
func TestWriteBacklogIsZeroWithoutGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.db.SetGroupCommit(0)
	tx := lockOperations(t, f)
	done := make(chan error, 3)
	for i := range cap(done) {
		go func() {
			_, err := f.ledger.Admit(ctx, request(f.refund(fmt.Sprintf("ord-%d", i), 100), fmt.Sprintf("req-%d", i), "w"))
			done <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if got := f.db.WriteBacklog(); got != 0 {
		t.Errorf("WriteBacklog without group commit: %v, want 0", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range cap(done) {
		if err := <-done; err != nil {
			t.Fatalf("an admission behind the lock: %v", err)
		}
	}
}

// lockOperations holds a lock on operations that stalls every write to it until the returned
// transaction ends (the test's cleanup ends it if the test does not).
func lockOperations(t *testing.T, f *fixture) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `LOCK TABLE operations IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	return tx
}
