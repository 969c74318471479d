package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/static"
)

// TestBrowserLLMLookup: an llm_call and a pipeline job whose
// generations the provider billed and stored, then timed out, wait in the Unknown queue.
// On-call opens each from /ops and clicks "Look up at provider" once: each closes as
// succeeded with its completion; the client's retry with its key replays the stored text,
// and the job goes on from its generation and publishes it. Nothing is generated twice.
func TestBrowserLLMLookup(t *testing.T) {
	t.Parallel()
	ensureChromium(t)
	if !static.HasHTMX() {
		t.Fatal("static/vendor/htmx.min.js was not embedded: run 'make deps' (npm ci) before the tests")
	}
	w := newLookupWorld(t, lookupSetup{})
	call, gen := w.billedThenTimedOut(t, "chat-41", "where is my parcel")
	jobOp, job, worker := w.unknownJob(t)
	jobGen := w.generations(t, 2)[1]
	if _, err := accounts(w.db).CreateUser(context.Background(), "oncall@example.com", password, desk.RoleOncall); err != nil {
		t.Fatal(err)
	}
	oncall := newSession(t, browser(t))
	w.dash.browserLogin(t, oncall, "oncall@example.com")
	for _, op := range []*ops.Operation{call, jobOp} {
		row := chromedp.CSS(`[data-testid="queue-row"][data-id="` + op.ID + `"]`)
		do(t, oncall, "open "+string(op.Kind)+" from the Unknown queue",
			chromedp.Navigate(w.url+"/ops"),
			clickLoad(byID("queue-tab-unknown")),
			chromedp.WaitVisible(row),
			clickLoad(chromedp.CSS(`[data-testid="queue-row"][data-id="`+op.ID+`"] a`)),
			chromedp.WaitVisible(byID("lookup-button")),
		)
		shot(t, oncall, "llm-unknown-"+string(op.Kind))
		do(t, oncall, "look "+string(op.Kind)+" up at the provider", clickLoad(byID("lookup-button")), chromedp.WaitVisible(byID("lookup-result")))
		if got := textOf(t, oncall, "lookup-result"); !strings.Contains(got, "Closed as succeeded") {
			t.Fatalf("%s lookup result = %q", op.Kind, got)
		}
		if got := textOf(t, oncall, "op-status"); got != "succeeded" {
			t.Fatalf("%s status after the lookup = %q", op.Kind, got)
		}
	}
	if got := textOf(t, oncall, "op-provider-ref"); got != jobGen.ID {
		t.Fatalf("the job's operation shows %q, want %s", got, jobGen.ID)
	}

	c := w.sdk("pipeline")
	out, err := c.Chat.Completions.New(context.Background(), ask("where is my parcel", 0), keyed("chat-41"))
	if err != nil || out.ID != gen.ID || out.Choices[0].Message.Content != gen.Content {
		t.Fatalf("the client's retry: %v %+v, want %q", err, out, gen.Content)
	}
	if n, err := worker.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("the worker took %d jobs: %v", n, err)
	}
	got, err := jobstore.New(w.db).GetJob(context.Background(), 0, job.ID)
	var res struct {
		Summary string `json:"summary"`
	}
	if err == nil {
		_ = json.Unmarshal(got.Result, &res)
	}
	if err != nil || got.Status != jobs.StatusPublished || res.Summary != jobGen.Content {
		t.Fatalf("job %v %s %s, want published with %q", err, got.Status, got.Result, jobGen.Content)
	}
	w.generations(t, 2)
}

// unknownJob submits a job whose generation the provider bills and stores, then times out,
// and runs a batch worker until the job waits as unknown. It returns the generation's
// operation, the job and the worker.
func (w *lookupWorld) unknownJob(t *testing.T) (*ops.Operation, *jobs.Job, *jobs.Worker) {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	up := w.world.Upstream(w.base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", AttemptTimeout: 300 * time.Millisecond})
	worker := w.world.JobWorker(up, "w1", 2*time.Second, false)
	tenant := w.world.Tenant("pipeline")
	s, err := w.world.Jobs().Submit(context.Background(), jobs.Submission{TenantID: tenant.ID, IdempotencyKey: "job-41",
		Document: jobs.Document{Text: "The parcel left the depot on Monday and has not arrived."}, Pipeline: "summarise",
		PromptVersion: "v1", ModelProfile: "small"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := worker.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("the worker took %d jobs: %v", n, err)
	}
	j, err := jobstore.New(w.db).GetJob(context.Background(), 0, s.Job.ID)
	if err != nil || j.Status != jobs.StatusUnknown {
		t.Fatalf("job %v %+v, want unknown", err, j)
	}
	op, err := w.db.Get(context.Background(), j.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	return op, j, worker
}
