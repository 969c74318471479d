package jobs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

// blinkingStore is the jobs' store on the real database whose failAt-th lease extension
// does not reach it, as during a failover or a dropped connection.
type blinkingStore struct {
	*jobstore.Store
	calls  atomic.Int32
	failAt int32
}

func (s *blinkingStore) ExtendJob(ctx context.Context, id, owner string, now, until time.Time) error {
	if s.calls.Add(1) == s.failAt {
		return ops.Errorf(ops.EUNAVAILABLE, "The database did not answer.")
	}
	return s.Store.ExtendJob(ctx, id, owner, now, until)
}

// One lease renewal lost to a database blink does not end a live worker's hold on its job:
// it renews at the next tick, so no other worker takes the job over in the middle of a
// generation longer than the lease, and the generation's cost is counted in the job's
// budget by the worker that paid for it. Before, the first failed renewal stopped renewing
// for good: another worker claimed the job mid-generation and the first one's cost was lost.
func TestALostLeaseRenewalDoesNotHandTheJobOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultSlow, Delay: 2 * e.lease, Times: 1})
	up := e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 10 * e.lease})
	slow := e.worker("slow", false)
	slow.Upstream = up
	// Call 1 confirms the lease at admission; call 2 is the first renewal during the send.
	slow.Store = &blinkingStore{Store: jobstore.New(e.db), failAt: 2}
	other := e.worker("other", false)
	other.Upstream = up
	j := e.submit(t, e.tenant, "long-generation", docA, "v1")

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		if n, err := slow.RunOnce(ctx); n != 1 || err != nil {
			t.Errorf("slow worker: %d %v", n, err)
		}
	}()
	// The other worker looks for due jobs all along.
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		case <-time.After(100 * time.Millisecond):
			if _, err := other.RunOnce(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	wg.Wait()
	e.drain(t, other)
	got := e.job(t, j.ID)
	op, err := e.db.Get(ctx, got.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != jobs.StatusPublished || got.Claims != 1 || got.CostMicros != op.CostMicros || op.CostMicros == 0 {
		t.Fatalf("job %s claimed %d times, cost %d of the generation's %d: want published by its one worker with the cost counted",
			got.Status, got.Claims, got.CostMicros, op.CostMicros)
	}
	if gens := e.generations(t); gens[j.DedupKey] != 1 {
		t.Fatalf("generations %v", gens)
	}
}
