package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
)

// A generation a person closed as succeeded from the provider's record, without its text,
// answers every job of its dedup key for good: whatever key the client sends, it cannot be
// generated again. The job's error says so, and never tells the client that another key
// generates anew (ops rule 12), which the next job shows it does not.
func TestATextlessSuccessSaysNoOtherKeyGeneratesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", false)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "answer-lost", docA, "v1")
	e.drain(t, w)
	op, err := e.db.Get(ctx, e.job(t, j.ID).OperationID)
	if err != nil || op.Status != ops.StatusUnknown {
		t.Fatalf("generation %+v %v, want unknown", op, err)
	}
	if _, err := w.Ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@test",
		Evidence: ops.Evidence{Kind: ops.EvidenceReconciliation, ProviderRef: "chatcmpl-billed", Summary: "billed in the usage report"}}); err != nil {
		t.Fatal(err)
	}
	w.Upstream = e.up
	e.drain(t, w)
	again := e.submit(t, e.tenant, "another-key", docA, "v1")
	e.drain(t, w)
	for _, id := range []string{j.ID, again.ID} {
		got := e.job(t, id)
		if got.Status != jobs.StatusFailed || got.ErrorCode != "result_unavailable" {
			t.Fatalf("job %s: %s %s", id, got.Status, got.ErrorCode)
		}
		if strings.Contains(got.ErrorMessage, "another key") || !strings.Contains(got.ErrorMessage, "prompt version or model profile") {
			t.Errorf("job %s says: %q", id, got.ErrorMessage)
		}
	}
	if gens := e.generations(t); gens[j.DedupKey] != 1 {
		t.Fatalf("generations %v, want the one billed", gens)
	}
}
