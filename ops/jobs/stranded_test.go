package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
)

// TestAJobLeftUnknownBesideAClosedOperationGoesOn is a job stranded as a worker of the
// release before closes queued unknown jobs could leave it while replicas are upgraded one
// by one: its ChangeJob made the job unknown after a close of its operation had committed,
// so no close will ever queue it. What the close brings about commits with it or is made up
// for (ops rule 6): a worker that finds nothing to claim sweeps such jobs back into the
// queue and runs them, so the job ends as its operation's close says instead of waiting in
// unknown for good.
func TestAJobLeftUnknownBesideAClosedOperationGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", false)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "stranded", docA, "v1")
	e.drain(t, w)
	got := e.job(t, j.ID)
	if got.Status != jobs.StatusUnknown {
		t.Fatalf("job %s, want unknown before the close", got.Status)
	}
	op, err := e.db.Get(context.Background(), got.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Ledger.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "answer lost; run it again"}, Actor: "oncall@test"}); err != nil {
		t.Fatal(err)
	}
	// The old worker's change lands after the close: the job is unknown beside a closed operation.
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE jobs SET status = 'unknown' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	// Any worker of this release with nothing to claim, here one that has not swept yet.
	e.drain(t, e.worker("w2", false))
	if got := e.job(t, j.ID); got.Status != jobs.StatusFailed || got.ErrorCode != "generation_failed" {
		t.Fatalf("the stranded job is %s %s, want failed as its operation's close says", got.Status, got.ErrorCode)
	}
}
