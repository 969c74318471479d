package web_test

import (
	"context"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

// runJobs submits one job per key for one document and runs a worker against the fake LLM
// until nothing is left: the jobs share one generation, the first generates it and the
// others are answered from it.
func (e *dashEnv) runJobs(t *testing.T, keys ...string) []*jobs.Job {
	t.Helper()
	ctx := context.Background()
	_, base := e.world.LLM(fake.LLMOptions{Seed: 3})
	up := e.world.Upstream(base, openai.Config{APIKey: "sk-dash", AttemptTimeout: 2 * time.Second})
	// The world's worker and service run on the system clock: the worker's leases must run
	// on real time, not the page's clock.
	w := e.world.JobWorker(up, "dash-test", 2*time.Second, false)
	svc := e.world.Jobs()
	var ids []string
	var err error
	for _, k := range keys {
		sub, err := svc.Submit(ctx, jobs.Submission{TenantID: e.tenant.ID, IdempotencyKey: k, Pipeline: "summarise",
			PromptVersion: "v1", ModelProfile: "fast", Document: jobs.Document{Text: "The parcel for order 5120 arrived damaged."}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.Job.ID)
	}
	for n := 1; n > 0; {
		if n, err = w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*jobs.Job, len(ids))
	for i, id := range ids {
		if out[i], err = jobstore.New(e.db).GetJob(ctx, 0, id); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestOpDetailShowsJobsOfLLMJobOperation opens an llm_job operation's page and finds every
// job that uses it with its checkpoints in lifecycle order; support sees the same, read-only.
func TestOpDetailShowsJobsOfLLMJobOperation(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	js := e.runJobs(t, "<k1>&x", "k2")
	opID := js[0].OperationID
	for _, j := range js {
		if j.Status != jobs.StatusPublished || j.OperationID != opID || opID == "" {
			t.Fatalf("job %s is %s on operation %q, want published on %q", j.ID, j.Status, j.OperationID, opID)
		}
	}
	if op := e.get(t, opID); op.Kind != ops.KindLLMJob {
		t.Fatalf("operation kind %s", op.Kind)
	}

	for _, who := range []struct {
		email string
		role  desk.Role
	}{{"oncall@example.com", desk.RoleOncall}, {"support@example.com", desk.RoleSupport}} {
		c := e.signIn(t, who.email, who.role)
		code, body := e.page(t, c, "/ops/"+opID)
		if code != 200 {
			t.Fatalf("%s: detail = %d", who.role, code)
		}
		mustContain(t, body, `data-testid="op-jobs"`, js[0].ID, js[1].ID, js[0].DedupKey, "summarise", ">v1<", ">fast<",
			html.EscapeString("<k1>&x"), ">k2<", ">shop<")
		if strings.Contains(body, "<k1>&x") {
			t.Errorf("%s: the idempotency key is not escaped", who.role)
		}
		if got := strings.Count(body, `data-testid="job-row"`); got != 2 {
			t.Errorf("%s: %d job rows, want 2", who.role, got)
		}
		// Both jobs show every stage, in order, all reached.
		for _, j := range js {
			i := strings.Index(body, `data-job-id="`+j.ID+`"`)
			if i < 0 {
				t.Fatalf("%s: no row for %s", who.role, j.ID)
			}
			row := body[i:]
			if end := strings.Index(row[1:], `data-testid="job-row"`); end > 0 {
				row = row[:end]
			}
			last := -1
			for _, s := range jobs.Stages {
				at := strings.Index(row, `data-stage="`+string(s)+`"`)
				if at <= last {
					t.Errorf("%s, job %s: stage %s at %d, after %d", who.role, j.ID, s, at, last)
				}
				last = at
			}
			if strings.Contains(row, `data-testid="checkpoint-pending"`) {
				t.Errorf("%s, job %s: a stage of a published job shows as not reached", who.role, j.ID)
			}
			if n := strings.Count(row, `data-testid="checkpoint-status"`); n != len(jobs.Stages) {
				t.Errorf("%s, job %s: %d checkpoint statuses", who.role, j.ID, n)
			}
		}
		if who.role == desk.RoleSupport && strings.Contains(body, `data-testid="op-actions"`) {
			t.Error("support sees the actions")
		}
	}

	// An operation of another kind has no jobs section.
	c := e.signIn(t, "oncall2@example.com", desk.RoleOncall)
	llmOp := e.llmUnknown(t, "chat-9")
	if _, body := e.page(t, c, "/ops/"+llmOp.ID); strings.Contains(body, `data-testid="op-jobs"`) {
		t.Error("an llm_call operation shows a jobs section")
	}
}

// TestOpDetailKeyPanelSaysAnAttemptWasSent opens the page of an llm_job operation whose
// first attempt got a 500 from the provider and no answer it could trust: its provider-key
// panel says an attempt was sent and what the provider answered, never that nothing was
// sent, since the provider may have generated it (ops rule 12).
func TestOpDetailKeyPanelSaysAnAttemptWasSent(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	ctx := context.Background()
	o, err := e.seed().Open(ctx, ops.Intent{TenantID: e.tenant.ID, Kind: ops.KindLLMJob, Provider: "openai",
		IntentKey: "dedup-500", Fingerprint: "fp-500"}, "req-500", "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := e.seed().Finish(ctx, o.Op, o.Attempt, "worker-1",
		ops.AttemptResult{Outcome: ops.OutcomeTimeout, HTTPStatus: 500, ErrorCode: "upstream_500"})
	if err != nil {
		t.Fatal(err)
	}
	if op.RetryUntil != nil {
		t.Fatalf("an llm_job operation has a replay deadline %v", op.RetryUntil)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	code, body := e.page(t, c, "/ops/"+op.ID)
	if code != 200 {
		t.Fatalf("detail = %d", code)
	}
	if strings.Contains(body, "Nothing was sent yet") {
		t.Fatalf("the key panel says nothing was sent after an attempt that got HTTP 500:\n%s", body)
	}
	mustContain(t, body, `data-testid="op-retention"`, "1 attempt was sent", "the provider answered HTTP 500",
		"it may have been generated")
}
