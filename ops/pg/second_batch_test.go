package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg"
)

// A write that finds a batch of the group commit at the server waits for it instead of
// opening a second transaction of one statement (a commit and a WAL flush of its own); the
// next write to arrive makes two waiting, and those two go out together at once, without
// waiting for the first batch (ops/pg/group.go). The server is held by the test's own
// transaction, which locks the operations table against writes, so each batch's statements
// wait there on one backend, counted in pg_locks; the lone write's bound on its wait is
// lifted here, and tested below.
func TestALoneWriteWaitsForTheBatchAtTheServerAndTwoGoTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pg.SetLoneWait(f.db, time.Minute)
	waiting, admit, release := heldWrites(t, f)

	admit(1)
	waitFor(t, "the first write waits at the server", func() bool { return waiting() == 1 })

	admit(2)
	waitFor(t, "the second write waits for a batch", func() bool { return f.db.WriteBacklog() > 0 })
	time.Sleep(50 * time.Millisecond)
	if got := waiting(); got != 1 {
		t.Errorf("a lone write behind a batch at the server: %d batches wait there, want 1 (it waits in the queue)", got)
	}
	if got := f.db.WriteBacklog(); got < 40*time.Millisecond {
		t.Errorf("a lone write behind a batch at the server has waited %v in the queue, want it waiting all along", got)
	}

	admit(3)
	waitFor(t, "the two waiting writes go out together", func() bool { return f.db.WriteBacklog() == 0 && waiting() == 2 })
	time.Sleep(50 * time.Millisecond)
	if got := waiting(); got != 2 {
		t.Errorf("after the third write: %d batches wait at the server, want 2 (the second and third in one)", got)
	}

	release(3)
}

// A batch held at the server does not hold a lone write behind it for longer than its bound
// (10 ms by default): with no other write arriving, it goes out in a batch of its own while
// the first is still held.
func TestALoneWriteBehindAHeldBatchGoesOutOnItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	waiting, admit, release := heldWrites(t, f)

	admit(1)
	waitFor(t, "the first write waits at the server", func() bool { return waiting() == 1 })
	admit(2)
	waitFor(t, "the lone write goes out beside the held batch", func() bool { return f.db.WriteBacklog() == 0 && waiting() == 2 })

	release(2)
}

// heldWrites locks f's operations table against writes for the test, so that each batch of
// the group commit waits at the server on one backend, and returns how many batches wait
// there (counted in pg_locks), a function that admits the i-th refund of f in the
// background, and one that lifts the lock and checks that the n refunds admitted succeed.
func heldWrites(t *testing.T, f *fixture) (waiting func() int, admit func(i int), release func(n int)) {
	tx := lockOperations(t, f)
	done := make(chan error, 8)
	waiting = func() int {
		t.Helper()
		var n int
		if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE relation = 'operations'::regclass AND NOT granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	admit = func(i int) {
		go func() {
			_, err := f.ledger.Admit(context.Background(), request(f.refund(fmt.Sprintf("ord-%d", i), 100), fmt.Sprintf("req-%d", i), "w"))
			done <- err
		}()
	}
	release = func(n int) {
		t.Helper()
		if err := tx.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-done; err != nil {
				t.Fatalf("a write behind the lock: %v", err)
			}
		}
	}
	return waiting, admit, release
}
