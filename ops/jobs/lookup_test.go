package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// TestUnknownGenerationSettledByLookup: the provider billed and stored a job's generation,
// then the answer timed out, so the job waits as unknown. A lookup at the provider's stored
// completions closes the generation with the completion it finds, and the job goes on from
// its llm_done checkpoint with that text: published, and nothing generated a second time.
func TestUnknownGenerationSettledByLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", false)
	impatient := e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	w.Upstream = impatient
	j := e.submit(t, e.tenant, "lost-answer", docA, "v1")
	e.drain(t, w)
	got := e.job(t, j.ID)
	if got.Status != jobs.StatusUnknown {
		t.Fatalf("job %s, want unknown", got.Status)
	}
	gens := e.fake.Generations()
	if len(gens) != 1 || !gens[0].Stored || gens[0].Metadata[llm.MetaOperation] != got.OperationID {
		t.Fatalf("the provider billed %+v", gens)
	}

	up := impatient.(*openai.Client)
	d := &desk.Desk{Ledger: w.Ledger, Events: e.db, Audit: e.db, Findings: e.db,
		Completions: &llm.Lookups{Ledger: w.Ledger, Events: e.db, Store: up, Prices: llm.DefaultPrices()}}
	out, err := d.Lookup(context.Background(), got.OperationID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed {
		t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
	}
	op, err := e.db.Get(context.Background(), got.OperationID)
	if err != nil || op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID || len(op.Result) == 0 {
		t.Fatalf("operation %+v %v", op, err)
	}

	w.Upstream = e.up
	e.drain(t, w)
	got = e.job(t, j.ID)
	var res struct {
		Summary      string `json:"summary"`
		CompletionID string `json:"completion_id"`
	}
	_ = json.Unmarshal(got.Result, &res)
	if got.Status != jobs.StatusPublished || res.Summary != gens[0].Content || res.CompletionID != gens[0].ID {
		t.Fatalf("job %s, result %s; want published with %q", got.Status, got.Result, gens[0].Content)
	}
	if n := len(e.fake.Generations()); n != 1 {
		t.Fatalf("%d generations, want the one found", n)
	}
	if n := e.count(t, `SELECT count(*) FROM job_checkpoints WHERE job_id = $1 AND stage = 'llm_done' AND status = 'ok'`, j.ID); n != 1 {
		t.Fatalf("%d ok llm_done checkpoints, want 1", n)
	}
}
