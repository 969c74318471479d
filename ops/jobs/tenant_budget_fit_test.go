package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
)

// capCatalog is the default catalog with two profiles of the dearer model: "mid" (300
// tokens, about 0.003 an answer) and "long", whose 10,000 tokens may cost 0.10 an answer.
func capCatalog() *jobs.Catalog {
	c := jobs.DefaultCatalog()
	c.Profiles["mid"] = jobs.Profile{Model: "gpt-4o", MaxTokens: 300}
	c.Profiles["long"] = jobs.Profile{Model: "gpt-4o", MaxTokens: 10_000}
	return c
}

// setBudget sets the env's tenant's LLM budget a day in micro-dollars.
func setBudget(t *testing.T, e *env, micros int64) {
	t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = $2 WHERE id = $1`, e.tenant, micros); err != nil {
		t.Fatal(err)
	}
}

// TestAJobWhoseGenerationWhatIsLeftCannotPaySendsNothing is the attack of a tenant whose
// spend of the day is below its budget by less than one generation of its job may cost: the
// profile's max_tokens on the dearer model, admitted on the spend alone, would be billed past
// the budget. The worker sends nothing for it: the job waits queued until the budget resets
// with llm_budget_too_small as its last error, the refusal recorded as the tenant's refused
// request; a job whose one generation may cost more than the whole budget of a day (lowered
// after the job was submitted: submission refuses such a job) fails at once, since no day
// pays for it, with the reason submission gives the same job (over_whole_llm_budget).
// ops rule 8
func TestAJobWhoseGenerationWhatIsLeftCannotPaySendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.svc.Catalog = capCatalog()
	w, clock := budgetedWorker(t, e)
	w.Catalog = capCatalog()
	// budget is the tenant's budget as its token read it at submission, which holds a job
	// to the whole budget of a day (TestAJobNoDayOfItsBudgetPaysIsRefusedAtSubmission).
	submit := func(key, doc, profile string, budget int64) *jobs.Job {
		t.Helper()
		s, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: key,
			Document: jobs.Document{Text: doc}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: profile,
			LLMBudgetMicros: budget})
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		return s.Job
	}
	// 0.102: the long job's worst case (0.10 of output and its input's bytes) fits the
	// whole budget, not what the mid job's 0.003 leaves of it.
	setBudget(t, e, 102_000)
	mid := submit("mid", docA, "mid", 102_000)
	e.drain(t, w)
	if j := e.job(t, mid.ID); j.Status != jobs.StatusPublished {
		t.Fatalf("the job within the budget is %s (%s), want published", j.Status, j.ErrorMessage)
	}
	clock.Advance(2 * time.Second)
	// Submission accepts it: it fits the whole budget, and waits for midnight in the queue.
	long := submit("long", docB, "long", 102_000)
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, long.ID)
	resets := clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if j.Status != jobs.StatusQueued || j.ErrorCode != llm.ReasonBudgetTooSmall || j.RunAfter.Before(resets.Add(-time.Minute)) {
		t.Errorf("the job whose worst case does not fit what is left is %s (%s: %s) until %s; want queued with %s until about %s",
			j.Status, j.ErrorCode, j.ErrorMessage, j.RunAfter, llm.ReasonBudgetTooSmall, resets)
	}
	if gens := e.generations(t); len(gens) != 1 {
		t.Errorf("generations %v, want only the one within the budget", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected'`, e.tenant); n != 1 {
		t.Errorf("%d refused requests recorded, want 1", n)
	}
	// A budget of 0.09 a day pays for no generation of the long profile, whatever is left: a
	// job submitted before the budget was lowered to it fails at once.
	over := submit("over", docA+" Again.", "long", 102_000)
	setBudget(t, e, 90_000)
	clock.Advance(2 * time.Second)
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Its last error carries the reason submission refuses the same job with
	// (over_whole_llm_budget), not the "not today" of llm_budget_too_small that the queued
	// job above waits with: a client reading the job is told "never" as one refused at
	// submission is, and the detail says so.
	// ops rule 12
	if j := e.job(t, over.ID); j.Status != jobs.StatusFailed || j.ErrorCode != jobs.ReasonOverWholeBudget ||
		!strings.Contains(j.ErrorMessage, "whole LLM budget of a day") {
		t.Errorf("the job over the whole budget is %s (%s: %s), want failed with %s saying no day pays for it",
			j.Status, j.ErrorCode, j.ErrorMessage, jobs.ReasonOverWholeBudget)
	}
	if gens := e.generations(t); len(gens) != 1 {
		t.Errorf("generations %v, want only the one within the budget", gens)
	}
}
