package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// A phase write (how far a stream got, with its lease extended) is progress, not a decision:
// no ops rule rests on it (ops rule 5 holds every unfinished attempt uncertain whatever its
// phase), so its commit does not wait for the WAL to reach the disk. The decisions around it,
// the operation's opening and its close, still do. Measured on a durable cluster of its own,
// where each waited-for commit is one fdatasync (pg_stat_wal.wal_sync), the tests' cluster
// flushing nothing.
func TestPhaseWriteDoesNotWaitForTheDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := durableDB(ctx, t, "test-phase-")
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	o, err := ledger.Admit(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "ord-1:100:usd",
		Fingerprint: "fp", OrderRef: "ord-1", AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		RequestRef: "req-1", Owner: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	syncs := func() int64 {
		t.Helper()
		var n int64
		if _, err := db.Pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const writes = 40
	before := syncs()
	for i := range writes {
		now := time.Now()
		phase := ops.PhaseSentToProvider
		if i%2 == 1 {
			phase = ops.PhaseFirstToken
		}
		if _, err := db.SetPhase(ctx, o.Op.ID, "w1", phase, now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
	}
	// The WAL writer flushes what waits every 200 ms on its own; the writes take far less.
	if n := syncs() - before; n > writes/4 {
		t.Errorf("%d phase writes waited for %d flushes, want them not to wait", writes, n)
	}
	cur, err := db.Get(ctx, o.Op.ID)
	if err != nil || cur.Phase != ops.PhaseFirstToken {
		t.Fatalf("phase after the writes %q (%v)", cur.Phase, err)
	}
	// The same session's next transaction commits as every ledger write does: durably.
	before = syncs()
	if _, err := db.Pool.Exec(ctx, `UPDATE operations SET updated_at = now() WHERE id = $1`, o.Op.ID); err != nil {
		t.Fatal(err)
	}
	if n := syncs() - before; n < 1 {
		t.Errorf("a write after the phase writes waited for %d flushes, want 1", n)
	}
}
