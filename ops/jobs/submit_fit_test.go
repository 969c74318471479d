package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
)

// submitWith submits doc under key with profile for the env's tenant whose token read its
// LLM budget as budget micro-dollars a day (0: none).
func (e *env) submitWith(key, doc, profile string, budget int64) (jobs.Submitted, error) {
	return e.svc.Submit(context.Background(), jobs.Submission{TenantID: e.tenant, IdempotencyKey: key,
		Document: jobs.Document{Text: doc}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: profile,
		LLMBudgetMicros: budget})
}

// TestAJobNoDayOfItsBudgetPaysIsRefusedAtSubmission is the attack of a budgeted tenant that
// submits a job whose one generation may cost more than its whole LLM budget of a day (the
// long profile's 10,000 tokens of gpt-4o, 0.10 a generation, against 0.09 a day): accepted,
// it was queued and failed at once by the worker, and a careless client submitting it again
// under new keys made a failed job each time. Submission refuses it as it refuses an
// unpriced model: over_whole_llm_budget (422, never the gateway's 429 that says "wait until
// midnight"), naming the worst case, the day's budget and what would fit, recorded as the
// tenant's refused request, no job made and nothing sent; the same key again is refused
// again. A job that fits the whole budget, and a tenant without a budget, are accepted.
// ops rule 8
func TestAJobNoDayOfItsBudgetPaysIsRefusedAtSubmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Catalog = capCatalog()
	refused := func() int {
		return e.count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND kind = 'llm_job' AND answer = 'rejected'`, e.tenant)
	}
	for try := 1; try <= 2; try++ {
		_, err := e.submitWith("over", docA, "long", 90_000)
		msg := ops.ErrorMessage(err)
		if ops.ErrorCode(err) != ops.EINVALID || ops.ErrorReason(err) != jobs.ReasonOverWholeBudget {
			t.Fatalf("submission %d of a job over the whole budget: %v; want %s %s", try, err, ops.EINVALID, jobs.ReasonOverWholeBudget)
		}
		// ops rule 12
		for _, want := range []string{"up to 0.100730 USD", "0.09 USD a day", "max_tokens", "10000", "nothing of it was sent"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal %q does not say %q", msg, want)
			}
		}
		if n := e.count(t, `SELECT count(*) FROM jobs WHERE tenant_id = $1`, e.tenant); n != 0 {
			t.Errorf("submission %d made %d jobs, want none", try, n)
		}
		if n := refused(); n != try {
			t.Errorf("after submission %d: %d refused requests recorded, want %d", try, n, try)
		}
	}
	if s, err := e.submitWith("mid", docA, "mid", 90_000); err != nil || !s.Created {
		t.Errorf("a job whose generation fits the whole budget: %+v, %v; want a new job", s, err)
	}
	if s, err := e.submitWith("free", docA, "long", 0); err != nil || !s.Created {
		t.Errorf("the long job of a tenant without a budget: %+v, %v; want a new job", s, err)
	}
	if len(e.generations(t)) != 0 {
		t.Errorf("generations %v at submission, want none", e.generations(t))
	}
}

// TestAJobMadeBeforeItsBudgetWasLoweredIsAnsweredByItsKey is the attack of a tenant whose
// budget was lowered after it submitted a job that the new budget cannot pay: its key must
// still name that job, not be refused as a new request, and the job is left to the worker,
// whose check fails it (TestAJobWhoseGenerationWhatIsLeftCannotPaySendsNothing). The repeat
// is recorded as the job's repeat; another body under that key is still refused as a reused
// key.
// ops rule 8
func TestAJobMadeBeforeItsBudgetWasLoweredIsAnsweredByItsKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Catalog = capCatalog()
	first, err := e.submitWith("before", docA, "long", 1_000_000)
	if err != nil || !first.Created {
		t.Fatalf("the job within the budget: %+v, %v", first, err)
	}
	again, err := e.submitWith("before", docA, "long", 90_000)
	if err != nil || again.Created || again.Job == nil || again.Job.ID != first.Job.ID {
		t.Fatalf("its key after the budget was lowered: %+v, %v; want its job %s again", again, err, first.Job.ID)
	}
	if j := e.job(t, first.Job.ID); j.Status != jobs.StatusQueued || j.DuplicatePosts != 1 {
		t.Errorf("the job is %s with %d repeats, want queued with 1", j.Status, j.DuplicatePosts)
	}
	if _, err := e.submitWith("before", docB, "long", 90_000); ops.ErrorReason(err) != jobs.ReasonKeyReused {
		t.Errorf("its key with another document: %v; want %s", err, jobs.ReasonKeyReused)
	}
}

// TestAJobAGenerationAlreadyAnswersIsAcceptedOverTheBudget is the attack of a refusal that
// says more than Settle knows: a job whose dedup key already has a succeeded generation
// (made while the budget was larger) costs nothing more, as the worker answers it from that
// generation without a send, so it is accepted and published though a new generation of it
// (the mid profile's 300 tokens of gpt-4o, over 0.003) would be over the whole budget of
// 0.002 a day.
// ops rule 12
func TestAJobAGenerationAlreadyAnswersIsAcceptedOverTheBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Catalog = capCatalog()
	w, _ := budgetedWorker(t, e)
	w.Catalog = capCatalog()
	if _, err := e.submitWith("first", docA, "mid", 1_000_000); err != nil {
		t.Fatal(err)
	}
	e.drain(t, w)
	setBudget(t, e, 2_000)
	s, err := e.submitWith("second", docA, "mid", 2_000)
	if err != nil || !s.Created {
		t.Fatalf("a job its generation already answers: %+v, %v; want a new job", s, err)
	}
	e.drain(t, w)
	if j := e.job(t, s.Job.ID); j.Status != jobs.StatusPublished {
		t.Errorf("the job is %s (%s), want published from the generation", j.Status, j.ErrorMessage)
	}
	for key, n := range e.generations(t) {
		if n != 1 {
			t.Errorf("dedup key %s generated %d times, want once", key, n)
		}
	}
}
