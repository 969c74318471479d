package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
)

// TestADeadlockVictimIsSentAgain: a statement sent on its own queues for an operation's row
// while two transactions of several statements (as group-commit batches are) lock that
// operation and another in opposite orders. Postgres breaks the cycle by rolling back the
// statement that queued between them; the store sends it again. A client's repeat that
// joins the operation is joined and recorded once, not answered 500 with its request
// unrecorded, and a change of the operation through the group commit is written.
// ops rule 8: every client request that reaches the ledger is recorded.
func TestADeadlockVictimIsSentAgain(t *testing.T) {
	t.Parallel()
	t.Run("a repeat's join", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		a := f.openRefund(t, "victim-a")
		f.deadlockAround(t, a.ID, func() error {
			o, err := f.db.Join(context.Background(), a.ID, "victim-repeat", t0)
			if err == nil && o.ClientRequestID == 0 {
				err = errors.New("no client request recorded")
			}
			return err
		})
		if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'victim-repeat'`); n != 1 {
			t.Errorf("the repeat left %d client requests, want 1", n)
		}
		if n := f.count(t, `SELECT duplicate_requests FROM operations WHERE id = $1`, a.ID); n != 1 {
			t.Errorf("the operation counts %d duplicate requests, want 1", n)
		}
	})
	t.Run("a change through the group commit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		a := f.openRefund(t, "victim-b")
		f.deadlockAround(t, a.ID, func() error {
			_, err := f.seed().MarkUnknown(context.Background(), a, "worker", "victim")
			return err
		})
		if n := f.count(t, `SELECT count(*) FROM operations WHERE id = $1 AND status = 'unknown'`, a.ID); n != 1 {
			t.Error("the operation is not unknown after its change")
		}
	})
}

// deadlockAround runs write, a statement that locks operation id's row, so that it closes a
// deadlock: a transaction x holds the row, write queues behind x, a transaction z holds
// another operation's row and queues behind write, and x then waits for z. write, waiting
// longest, is the one Postgres rolls back; sent again, it queues behind z, and x, which looks
// for a deadlock after the write's and before z's, gives way. It fails unless write ends
// without error.
func (f *fixture) deadlockAround(t *testing.T, id string, write func() error) {
	t.Helper()
	ctx := context.Background()
	other := f.openRefund(t, "victim-other-"+id[:8])
	x := f.lockingTx(t, "2s")
	z := f.lockingTx(t, "10s")
	f.lockOperation(t, x, id)
	wrote := make(chan error, 1)
	go func() { wrote <- write() }()
	f.waitForLockWaiters(t, 1)
	f.lockOperation(t, z, other.ID)
	zDone := make(chan error, 1)
	go func() { zDone <- f.touch(z, id) }()
	f.waitForLockWaiters(t, 2)
	if err := f.touch(x, other.ID); err != nil && !isDeadlock(err) {
		t.Fatalf("x: %v", err)
	}
	if err := x.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-zDone; err != nil {
		t.Fatalf("z: %v", err)
	}
	if err := z.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("the write queued between the two transactions failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write queued between the two transactions did not end")
	}
}

// openRefund opens a refund leased to a worker and returns its operation.
func (f *fixture) openRefund(t *testing.T, order string) *ops.Operation {
	t.Helper()
	o, err := f.seed().Open(context.Background(), f.refund(order, 100), "r-"+order, "worker")
	if err != nil {
		t.Fatal(err)
	}
	return o.Op
}

// lockingTx begins a transaction on a connection of its own that looks for deadlocks only
// after waiting timeout.
func (f *fixture) lockingTx(t *testing.T, timeout string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := f.db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, `SELECT set_config('deadlock_timeout', $1, false)`, timeout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(ctx, `RESET deadlock_timeout`) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	return tx
}

// lockOperation locks operation id's row in tx.
func (f *fixture) lockOperation(t *testing.T, tx pgx.Tx, id string) {
	t.Helper()
	if err := f.touch(tx, id); err != nil {
		t.Fatal(err)
	}
}

// touch updates operation id's row in tx without changing it.
func (f *fixture) touch(tx pgx.Tx, id string) error {
	_, err := tx.Exec(context.Background(), `UPDATE operations SET updated_at = updated_at WHERE id = $1`, id)
	return err
}

// waitForLockWaiters waits until n sessions of the test's database wait for a lock.
func (f *fixture) waitForLockWaiters(t *testing.T, n int) {
	t.Helper()
	for range 500 {
		if f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d sessions came to wait for a lock", n)
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}
