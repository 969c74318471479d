package pg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestTwoReapersAtOnceTakeEachStalledOperationOnce: two replicas' reapers run their pass at
// the same moment over twenty refunds whose worker died. Each stalled operation is claimed by
// one of them, resent once with its own key and closed once: one reap and one close of the
// attempt in its audit trail, never a second send.
// ops rule 6: a change is a compare-and-set, so two reapers at once change each row once.
func TestTwoReapersAtOnceTakeEachStalledOperationOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var mu sync.Mutex
	sent := map[string]int{}
	sender := ops.SenderFunc(func(_ context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		mu.Lock()
		sent[op.ID]++
		mu.Unlock()
		if a.ProviderKey != op.ProviderKey {
			t.Errorf("%s sent with key %s, not its own", op.ID, a.ProviderKey)
		}
		// A send that takes a while, so the two passes overlap.
		time.Sleep(5 * time.Millisecond)
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_" + op.ID[:8]}}
	})
	var ids []string
	for i := range 20 {
		o, err := f.seed().Open(ctx, f.refund(fmt.Sprintf("stall%d", i), 100), "r", "dead-worker")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.Op.ID)
	}
	f.clock.Advance(2 * time.Hour)
	var wg sync.WaitGroup
	for _, owner := range []string{"reaper-a", "reaper-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &ops.Reaper{Ledger: f.ledger, Owner: owner, Senders: map[ops.Kind]ops.Sender{ops.KindRefund: sender},
				Sleep: func(context.Context, time.Duration) error { return nil }}
			if _, err := r.RunOnce(ctx); err != nil {
				t.Errorf("%s: %v", owner, err)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if sent[id] != 1 {
			t.Errorf("%s sent %d times by the two reapers, want once", id, sent[id])
		}
		if op, _ := f.db.Get(ctx, id); op.Status != ops.StatusSucceeded {
			t.Errorf("%s is %s after the passes, want succeeded", id, op.Status)
		}
		if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'reap'`, id); n != 1 {
			t.Errorf("%s reaped %d times, want once", id, n)
		}
		if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND outcome = 'ok'`, id); n != 1 {
			t.Errorf("%s has %d successful attempts, want one", id, n)
		}
	}
}
