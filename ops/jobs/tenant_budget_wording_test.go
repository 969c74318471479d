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

// speaksOfTheJob fails unless msg, a budget refusal a job's client reads, speaks of the
// job's generation: the client submitted a job and made no call, and has no key of a call
// to retry.
func speaksOfTheJob(t *testing.T, what, msg string) {
	t.Helper()
	for _, wrong := range []string{"This call", "this call", "a retry of a key", "its body's"} {
		if strings.Contains(msg, wrong) {
			t.Errorf("%s says %q, speaking of a call the job's client never made: %s", what, wrong, msg)
		}
	}
	if !strings.Contains(msg, "this job's generation") && !strings.Contains(msg, "This job's generation") {
		t.Errorf("%s does not speak of the job's generation: %s", what, msg)
	}
}

// TestAJobsBudgetRefusalsSpeakOfItsGeneration is the attack of a job's client reading a
// budget refusal written for a gateway call: "This call may cost…", "this call was recorded
// as refused", "a retry of a key whose call already ran is still answered". A job is no
// call, and its client retries nothing: the job waits or fails. Every budget refusal a job
// can carry as its last error (what is left too small for its generation, its generation
// over the whole budget of a day, the budget spent) speaks of the job's generation.
// ops rule 12
func TestAJobsBudgetRefusalsSpeakOfItsGeneration(t *testing.T) {
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
	setBudget(t, e, 102_000)
	submit("mid", docA, "mid")
	e.drain(t, w)
	clock.Advance(2 * time.Second)
	long := submit("long", docB, "long")
	over := submit("over", docA+" Again.", "long")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, long.ID)
	if j.ErrorCode != llm.ReasonBudgetTooSmall || !strings.HasPrefix(j.ErrorMessage, "This job's generation may cost up to ") {
		t.Errorf("the job held for what is left has %s: %s; want %s opening with what its generation may cost",
			j.ErrorCode, j.ErrorMessage, llm.ReasonBudgetTooSmall)
	}
	speaksOfTheJob(t, "the job held for what is left", j.ErrorMessage)

	// 0.09 a day pays for no generation of the long profile: the worker fails the job.
	setBudget(t, e, 90_000)
	clock.Advance(2 * time.Second)
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j = e.job(t, over.ID)
	if j.ErrorCode != jobs.ReasonOverWholeBudget {
		t.Fatalf("the job over the whole budget has %s: %s; want %s", j.ErrorCode, j.ErrorMessage, jobs.ReasonOverWholeBudget)
	}
	speaksOfTheJob(t, "the job over the whole budget", j.ErrorMessage)

	spendAll(t, e)
	clock.Advance(2 * time.Second)
	past := submit("past", docB+" Once more.", "mid")
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j = e.job(t, past.ID)
	if j.ErrorCode != llm.ReasonBudgetSpent {
		t.Fatalf("the job past the spent budget has %s: %s; want %s", j.ErrorCode, j.ErrorMessage, llm.ReasonBudgetSpent)
	}
	speaksOfTheJob(t, "the job past the spent budget", j.ErrorMessage)
}
