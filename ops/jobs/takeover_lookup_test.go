package jobs_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
)

// TestTakeoverAfterATimeoutAndARefusalLooksUpFirst: the provider billed a job's first
// attempt and shows its stored copy a moment later; the answer was lost, the lookup before
// the resend found nothing yet, and the resend got a 429 whose wait outlasted the worker's
// pass. The generation's last attempt is the 429, but its first may have generated: the
// worker that goes on with the job asks the provider's store before it sends anything,
// finds the first attempt's completion and publishes the job with it. One generation billed
// (ops rule 3).
//
// The provider's clock is the test's: the stored copy shows when the test moves that clock
// past the lag, not after some time on the wall, so a slow machine neither lets the first
// pass's lookup find it nor has the takeover look before it shows. The attempt timeout is
// far above a local answer's time and far below the held answer's.
func TestTakeoverAfterATimeoutAndARefusalLooksUpFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	provider := &aheadClock{}
	e.fake, e.base = e.world.LLM(fake.LLMOptions{Seed: 1, Clock: provider.Now})
	const lag = time.Hour
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Minute, Times: 1, Lag: lag})
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultRateLimit, RetryAfter: 60, Times: 1})
	impatient := e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 2 * time.Second})
	w1 := e.worker("w1", true)
	w1.Upstream = impatient
	j := e.submit(t, e.tenant, "timeout-then-429", docA, "v1")
	// The pass ends before the 429's Retry-After: the operation is released, the job queued.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := w1.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("first pass: %d jobs, %v", n, err)
	}
	got := e.job(t, j.ID)
	op, err := e.db.Get(ctx, got.OperationID)
	if err != nil || op.Status != ops.StatusInProgress || op.Attempts != 2 || got.Status != jobs.StatusQueued {
		t.Fatalf("after the first pass: job %s, operation %+v %v; want queued, in progress after a timeout and a 429", got.Status, op, err)
	}
	gens := e.fake.Generations()
	if len(gens) != 1 {
		t.Fatalf("the provider billed %d generations, want the first attempt's", len(gens))
	}
	// The provider now shows what the first attempt generated.
	provider.advance(lag)

	w2 := e.worker("w2", true)
	w2.Upstream = impatient
	e.drain(t, w2)
	got = e.job(t, j.ID)
	var res struct {
		CompletionID string `json:"completion_id"`
	}
	_ = json.Unmarshal(got.Result, &res)
	if n := len(e.fake.Generations()); n != 1 {
		t.Fatalf("the provider billed %d generations, want 1: the takeover sent again without looking attempt 1 up", n)
	}
	if got.Status != jobs.StatusPublished || res.CompletionID != gens[0].ID {
		t.Fatalf("job %s (%s) with %s; want published with %s", got.Status, got.ErrorCode, got.Result, gens[0].ID)
	}
	if op, err = e.db.Get(ctx, got.OperationID); err != nil || op.Status != ops.StatusSucceeded || op.Attempts != 2 {
		t.Fatalf("operation %+v %v; want succeeded by the lookup, no third attempt", op, err)
	}
	if n := e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup' AND provider_ref = $2`, op.ID, gens[0].ID); n != 1 {
		t.Fatalf("%d lookups recorded as the evidence that found %s, want 1", n, gens[0].ID)
	}
}

// aheadClock is the time on the wall moved ahead by what the test advanced it.
type aheadClock struct{ ahead atomic.Int64 }

// Now is the clock's time.
func (c *aheadClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func (c *aheadClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }
