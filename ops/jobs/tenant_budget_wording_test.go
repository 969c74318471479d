package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
)

// TestAJobHeldForWhatIsLeftIsToldToChooseAProfile is the attack of a job's budget message
// that tells its client to change what it cannot: a job's max_tokens is its model profile's,
// which the client picks by name, so a job held for what is left of its tenant's budget is
// told to choose a profile of fewer max_tokens or a cheaper model, or a shorter document,
// never to "send max_tokens" of some number as a gateway call is.
// ops rule 12
func TestAJobHeldForWhatIsLeftIsToldToChooseAProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.svc.Catalog = capCatalog()
	w, clock := budgetedWorker(t, e)
	w.Catalog = capCatalog()
	submit := func(key, doc, profile string) *jobs.Job {
		t.Helper()
		s, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: key, Document: jobs.Document{Text: doc},
			Pipeline: "summarise", PromptVersion: "v1", ModelProfile: profile, LLMBudgetMicros: 102_000})
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		return s.Job
	}
	// 0.102: the long job's worst case fits the whole budget, not what the mid job leaves.
	setBudget(t, e, 102_000)
	submit("mid", docA, "mid")
	e.drain(t, w)
	clock.Advance(2 * time.Second)
	long := submit("long", docB, "long")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, long.ID)
	if j.Status != jobs.StatusQueued || j.ErrorCode != llm.ReasonBudgetTooSmall {
		t.Fatalf("the job whose worst case does not fit what is left is %s (%s: %s), want queued with %s",
			j.Status, j.ErrorCode, j.ErrorMessage, llm.ReasonBudgetTooSmall)
	}
	for _, want := range []string{`model profile "long"`, "choose a model profile with fewer max_tokens or a cheaper model", "shorter document"} {
		if !strings.Contains(j.ErrorMessage, want) {
			t.Errorf("the held job's message does not say %q: %s", want, j.ErrorMessage)
		}
	}
	if strings.Contains(j.ErrorMessage, "send that or less") {
		t.Errorf("the held job is told to send a max_tokens it cannot name: %s", j.ErrorMessage)
	}
}
