package pg_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// A stream's phase write far from its lease's end leaves the lease as it is: lease_until is
// indexed, and a write that changes an indexed column adds an entry to every index of
// operations, where one that changes none is a heap-only update. The lease is still renewed
// on its own schedule, so it never lapses while its owner works (ops rule 1: only the
// lease's holder sends with the key; the reaper takes over only a lease that ran out).
func TestPhaseWriteLeavesAFarLeaseAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := pgtest.NewWithURL(t)
	// One connection: the writes and the reads of their statistics share a backend, which
	// sends its statistics when told to.
	db, tenant := openWithTenant(ctx, t, withParams(url, "pool_max_conns=1"), pg.PreparedWhenDirect())
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	ledger.Limits.Lease = time.Minute
	a, err := ledger.Admit(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "ord-1:100:usd",
		Fingerprint: "fp", OrderRef: "ord-1", AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		RequestRef: "req-1", Owner: "w1"})
	if err != nil || a.Attempt == nil {
		t.Fatalf("admit: %+v %v", a, err)
	}
	claimed := *a.Op.LeaseUntil
	updates := func() (all, hot int64) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'operations'`).Scan(&all, &hot); err != nil {
			t.Fatal(err)
		}
		return all, hot
	}
	var midLease atomic.Pointer[time.Time]
	var midPhase atomic.Value
	var beforeAll, beforeHot, afterAll, afterHot int64
	send := ops.SenderFunc(func(sctx context.Context, op *ops.Operation, _ *ops.Attempt) ops.AttemptResult {
		beforeAll, beforeHot = updates()
		ops.ReportPhase(sctx, ops.PhaseSentToProvider)
		ops.ReportPhase(sctx, ops.PhaseFirstToken)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			cur, err := db.Get(ctx, op.ID)
			if err == nil && cur.Phase == ops.PhaseFirstToken {
				midLease.Store(cur.LeaseUntil)
				midPhase.Store(cur.Phase)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		afterAll, afterHot = updates()
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_1", Body: []byte(`{"id":"re_1"}`)}}
	})
	if _, err := ledger.Run(ctx, a.Op, send, ops.RunSpec{Owner: "w1", First: a.Attempt}); err != nil {
		t.Fatal(err)
	}
	if p, _ := midPhase.Load().(ops.Phase); p != ops.PhaseFirstToken {
		t.Fatalf("the phase was not written during the send (%q)", p)
	}
	if l := midLease.Load(); l == nil || !l.Equal(claimed) {
		t.Errorf("the phase write moved the lease from %v to %v with most of it left", claimed, l)
	}
	if afterAll-beforeAll < 1 || afterHot-beforeHot != afterAll-beforeAll {
		t.Errorf("the phase write made %d updates, %d of them heap-only; want every one heap-only", afterAll-beforeAll, afterHot-beforeHot)
	}
}
