package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

func TestMain(m *testing.M) { testworld.Main(m) }

const (
	docA = "Order 4417 was refunded twice.\n\nThe customer asked for one refund of $38.00 and the agent clicked twice."
	docB = "A second document about a delayed parcel and a voucher that was never sent."
)

// env is the job pipeline wired for real: Postgres, the OpenAI adapter, the fake LLM.
type env struct {
	world  *testworld.World
	db     *pg.DB
	fake   *fake.LLM
	up     llm.Upstream
	base   string
	svc    *jobs.Service
	tenant int64
	lease  time.Duration
}

// newEnv is the pipeline with the test registered as the receiver of every job event.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvNobodyReceives(t)
	e.world.ConsumeJobEvents()
	return e
}

// newEnvNobodyReceives is the pipeline with no receiver of job events registered, as a
// server without SETTLE_JOB_WEBHOOK_URL runs it.
func newEnvNobodyReceives(t *testing.T) *env {
	t.Helper()
	w := testworld.New(t)
	fl, base := w.LLM(fake.LLMOptions{Seed: 1})
	up := w.Upstream(base, openai.Config{APIKey: "sk-test", AttemptTimeout: 2 * time.Second})
	return &env{world: w, db: w.DB, fake: fl, up: up, base: base, tenant: w.Tenant("pipeline").ID, lease: 2 * time.Second,
		svc: w.Jobs()}
}

// worker is a worker of the world that retries without pausing.
func (e *env) worker(name string, retryUncertain bool) *jobs.Worker {
	w := e.world.JobWorker(e.up, name, e.lease, retryUncertain)
	w.Sleep = func(context.Context, time.Duration) error { return nil }
	return w
}

func (e *env) submit(t *testing.T, tenant int64, key, text, version string) *jobs.Job {
	t.Helper()
	s, err := e.svc.Submit(context.Background(), jobs.Submission{TenantID: tenant, IdempotencyKey: key,
		Document: jobs.Document{Text: text}, Pipeline: "summarise", PromptVersion: version, ModelProfile: "fast"})
	if err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return s.Job
}

// drain runs the workers concurrently until no job is due.
func (e *env) drain(t *testing.T, ws ...*jobs.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := w.RunOnce(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		if total == 0 && e.count(t, `SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')`) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("jobs did not settle")
		}
		if total == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) job(t *testing.T, id string) *jobs.Job {
	t.Helper()
	j, err := jobstore.New(e.db).GetJob(context.Background(), 0, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// generations counts the fake provider's billed generations per dedup key, read through
// the X-Client-Request-Id (operation id and attempt) the adapter sends.
func (e *env) generations(t *testing.T) map[string]int {
	t.Helper()
	return generationsByDedup(t, e.db, e.fake.Generations())
}

func generationsByDedup(t *testing.T, db *pg.DB, gens []fake.Generation) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, g := range gens {
		opID, _, ok := strings.Cut(g.ClientRequestID, ".")
		if !ok {
			t.Fatalf("generation %s without X-Client-Request-Id", g.ID)
		}
		var intent string
		if err := db.Pool.QueryRow(context.Background(), `SELECT intent_key FROM operations WHERE id = $1`, opID).Scan(&intent); err != nil {
			t.Fatalf("generation %s names operation %s: %v", g.ID, opID, err)
		}
		out[strings.TrimPrefix(intent, "job:")]++
	}
	return out
}

func TestRepeatedSubmitReturnsTheSameJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.submit(t, e.tenant, "intent-1", docA, "v1")
	again := e.submit(t, e.tenant, "intent-1", docA, "v1")
	if again.ID != first.ID || again.DedupKey != first.DedupKey || again.DuplicatePosts != 1 {
		t.Fatalf("repeat: %+v, first %+v", again, first)
	}
	_, err := e.svc.Submit(context.Background(), jobs.Submission{TenantID: e.tenant, IdempotencyKey: "intent-1",
		Document: jobs.Document{Text: docB}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if ops.ErrorReason(err) != jobs.ReasonKeyReused || ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("same key, other document: %v", err)
	}
	// The three keys are apart: a new Idempotency-Key for the same input is a new job with
	// the same dedup key.
	other := e.submit(t, e.tenant, "intent-2", docA, "v1")
	if other.ID == first.ID || other.DedupKey != first.DedupKey {
		t.Fatalf("new key: %+v", other)
	}
	if n := e.count(t, `SELECT count(*) FROM jobs`); n != 2 {
		t.Fatalf("%d jobs", n)
	}
}

func TestConcurrentWorkersPublishOneResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a1 := e.submit(t, e.tenant, "a-1", docA, "v1")
	a2 := e.submit(t, e.tenant, "a-2", docA, "v1") // another intent, the same computation
	b := e.submit(t, e.tenant, "b-1", docB, "v1")
	e.drain(t, e.worker("w1", false), e.worker("w2", false), e.worker("w3", false), e.worker("w4", false))

	for _, j := range []*jobs.Job{a1, a2, b} {
		got := e.job(t, j.ID)
		if got.Status != jobs.StatusPublished || len(got.Result) == 0 {
			t.Fatalf("job %s: %s %s %s", j.IdempotencyKey, got.Status, got.ErrorCode, got.ErrorMessage)
		}
		if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, j.ID); n != 1 {
			t.Fatalf("job %s has %d events", j.IdempotencyKey, n)
		}
	}
	gens := e.generations(t)
	if len(gens) != 2 || gens[a1.DedupKey] != 1 || gens[b.DedupKey] != 1 {
		t.Fatalf("generations per dedup key: %v", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM operations WHERE kind = 'llm_job' AND status = 'succeeded'`); n != 2 {
		t.Fatalf("%d succeeded generations", n)
	}
	if e.job(t, a1.ID).OperationID != e.job(t, a2.ID).OperationID {
		t.Fatal("jobs with one dedup key use different generations")
	}
}

func TestTwoWorkersOnTheSameJobPublishOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultSlow, Delay: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "same-job", docA, "v1")
	w1, w2 := e.worker("w1", false), e.worker("w2", false)
	ctx := context.Background()
	now := time.Now()
	c1, err := jobstore.New(e.db).ClaimJobs(ctx, "w1", now, now.Add(e.lease), 5)
	if err != nil || len(c1) != 1 {
		t.Fatalf("w1 claim: %v %v", c1, err)
	}
	if c2, err := jobstore.New(e.db).ClaimJobs(ctx, "w2", now, now.Add(e.lease), 5); err != nil || len(c2) != 0 {
		t.Fatalf("w2 claimed a leased job: %v %v", c2, err)
	}
	// w1 stalls long enough to lose its lease but is still alive: w2 takes the job over and
	// both run it at once.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	c2, err := jobstore.New(e.db).ClaimJobs(ctx, "w2", time.Now(), time.Now().Add(e.lease), 5)
	if err != nil || len(c2) != 1 {
		t.Fatalf("w2 take over: %v %v", c2, err)
	}
	var wg sync.WaitGroup
	for _, run := range []struct {
		w *jobs.Worker
		j *jobs.Job
	}{{w1, c1[0]}, {w2, c2[0]}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = run.w.Process(ctx, run.j) // the loser stops on its lost lease
		}()
	}
	wg.Wait()
	e.drain(t, w1, w2)
	if got := e.job(t, j.ID); got.Status != jobs.StatusPublished {
		t.Fatalf("job %s %s", got.Status, got.ErrorCode)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, j.ID); n != 1 {
		t.Fatalf("%d job.published events", n)
	}
	if gens := e.generations(t); gens[j.DedupKey] != 1 {
		t.Fatalf("generations: %v", gens)
	}
}

func TestNewPromptVersionIsANewComputation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v1 := e.submit(t, e.tenant, "doc-v1", docA, "v1")
	e.drain(t, e.worker("w1", false))
	v2 := e.submit(t, e.tenant, "doc-v2", docA, "v2")
	fast := e.submit(t, e.tenant, "doc-v1-again", docA, "v1")
	e.drain(t, e.worker("w1", false))
	if v1.DedupKey == v2.DedupKey {
		t.Fatal("a new prompt version kept the dedup key")
	}
	gens := e.generations(t)
	if gens[v1.DedupKey] != 1 || gens[v2.DedupKey] != 1 || len(gens) != 2 {
		t.Fatalf("generations: %v", gens)
	}
	if e.job(t, v2.ID).OperationID == e.job(t, v1.ID).OperationID || e.job(t, fast.ID).OperationID != e.job(t, v1.ID).OperationID {
		t.Fatal("operations are not per computation")
	}
	// A new profile is a new computation too, and another tenant never shares a result.
	other, err := e.db.EnsureTenant(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if jobs.DedupKey(e.tenant, "h", "summarise", "v1", "fast") == jobs.DedupKey(e.tenant, "h", "summarise", "v1", "quality") ||
		jobs.DedupKey(e.tenant, "h", "summarise", "v1", "fast") == jobs.DedupKey(other.ID, "h", "summarise", "v1", "fast") {
		t.Fatal("dedup key ignores the profile or the tenant")
	}
	theirs := e.submit(t, other.ID, "doc-v1", docA, "v1")
	e.drain(t, e.worker("w1", false))
	if gens := e.generations(t); gens[theirs.DedupKey] != 1 || len(gens) != 3 {
		t.Fatalf("another tenant shared a result: %v", gens)
	}
}

func TestTimeoutIsRecordedAsUnknownOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The provider bills the generation and answers only after the adapter gave up.
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", false)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "timeout", docA, "v1")
	e.drain(t, w)

	got := e.job(t, j.ID)
	if got.Status != jobs.StatusUnknown || got.ErrorCode != "outcome_unknown" || got.OperationID == "" {
		t.Fatalf("job: %s %s", got.Status, got.ErrorCode)
	}
	op, err := e.db.Get(context.Background(), got.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown || op.Kind != ops.KindLLMJob {
		t.Fatalf("operation %s %s: not a proven failure, an unknown outcome", op.Kind, op.Status)
	}
	atts, _ := e.db.Attempts(context.Background(), op.ID)
	if len(atts) != 1 || atts[0].Outcome != ops.OutcomeTimeout {
		t.Fatalf("attempts: %+v", atts)
	}
	// It waits in the dashboard's Unknown queue like every operation; batch sends nothing more.
	page, err := deskstore.New(e.db).ListQueue(context.Background(), desk.QueueFilter{Status: ops.StatusUnknown, Kind: ops.KindLLMJob}, time.Now())
	if err != nil || len(page.Ops) != 1 || page.Ops[0].ID != op.ID {
		t.Fatalf("unknown queue: %+v %v", page.Ops, err)
	}
	if n, _ := w.RunOnce(context.Background()); n != 0 {
		t.Fatal("a worker picked up a job whose outcome is unknown")
	}
	if gens := e.generations(t); gens[j.DedupKey] != 1 {
		t.Fatalf("generations: %v", gens)
	}
	var cpStatus string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT status FROM job_checkpoints WHERE job_id = $1 AND stage = 'llm_done'`, j.ID).Scan(&cpStatus); err != nil || cpStatus != "unknown" {
		t.Fatalf("llm_done checkpoint %q %v", cpStatus, err)
	}

	// A person closes it as failed with a note: the provider may still have generated it,
	// so the dedup key keeps answering with the failure (ops rule 11) and nothing is sent.
	if _, err := w.Ledger.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "answer lost; run it again"}, Actor: "oncall@test"}); err != nil {
		t.Fatal(err)
	}
	w.Upstream = e.up
	e.drain(t, w)
	if got := e.job(t, j.ID); got.Status != jobs.StatusFailed || got.ErrorCode != "generation_failed" || !strings.Contains(got.ErrorMessage, "may have generated it") {
		t.Fatalf("after the close: %s %s %q", got.Status, got.ErrorCode, got.ErrorMessage)
	}
	if gens := e.generations(t); gens[j.DedupKey] != 1 {
		t.Fatalf("generations after a person's failed close: %v, want no resend", gens)
	}
}

func TestValidatorVersionRepeatsValidationNotGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j1 := e.submit(t, e.tenant, "first", docA, "v1")
	e.drain(t, e.worker("w1", false))
	w := e.worker("w2", false)
	w.ValidatorVersion = "validate/v2"
	j2 := e.submit(t, e.tenant, "second", docA, "v1")
	e.drain(t, w)
	if got := e.job(t, j2.ID); got.Status != jobs.StatusPublished {
		t.Fatalf("%s %s", got.Status, got.ErrorCode)
	}
	if gens := e.generations(t); gens[j1.DedupKey] != 1 {
		t.Fatalf("a new validator generated again: %v", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM job_checkpoints WHERE dedup_key = $1 AND stage = 'validated'`, j1.DedupKey); n != 2 {
		t.Fatalf("%d validated checkpoints, want one per validator version", n)
	}
	if n := e.count(t, `SELECT count(*) FROM job_checkpoints WHERE dedup_key = $1 AND stage = 'llm_done'`, j1.DedupKey); n != 1 {
		t.Fatalf("%d llm_done checkpoints", n)
	}
	_, cps, err := e.svc.Get(context.Background(), e.tenant, j2.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, c := range cps {
		stages = append(stages, string(c.Stage))
		if c.InputHash == "" || c.CodeVersion == "" || c.Status != jobs.CheckpointOK {
			t.Fatalf("checkpoint %+v", c)
		}
	}
	if got := strings.Join(stages, ","); got != "uploaded,text_extracted,chunks_ready,llm_done,validated,published" {
		t.Fatalf("stages %s", got)
	}
}

func TestSubmitAnswersFromASucceededComputation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Reuse = e.worker("api", false)
	first := e.submit(t, e.tenant, "first", docA, "v1")
	e.drain(t, e.worker("w1", false))
	s, err := e.svc.Submit(context.Background(), jobs.Submission{TenantID: e.tenant, IdempotencyKey: "by-hash",
		Document: jobs.Document{Hash: "sha256:" + first.DocumentHash, Ref: "s3://docs/4417.txt"},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Job.Status != jobs.StatusPublished || s.Job.DedupKey != first.DedupKey {
		t.Fatalf("by hash: %s %s %s", s.Job.Status, s.Job.ErrorCode, s.Job.ErrorMessage)
	}
	if gens := e.generations(t); gens[first.DedupKey] != 1 {
		t.Fatalf("generations: %v", gens)
	}
	// The second job is the generation's duplicate client request, answered as a replay.
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND duplicate AND answer = 'replayed'`, s.Job.OperationID); n != 1 {
		t.Fatalf("%d replayed duplicate requests", n)
	}
}

func TestRetryBudget(t *testing.T) {
	t.Parallel()
	t.Run("cost", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.svc.MaxCostMicros = 1
		j := e.submit(t, e.tenant, "cheap", docA, "v1")
		e.drain(t, e.worker("w1", false))
		got := e.job(t, j.ID)
		if got.Status != jobs.StatusFailed || got.ErrorCode != "budget_exhausted" || !strings.Contains(got.ErrorMessage, "cost") {
			t.Fatalf("%s %s %s", got.Status, got.ErrorCode, got.ErrorMessage)
		}
		if n := len(e.fake.Generations()); n != 0 {
			t.Fatalf("%d generations", n)
		}
	})
	t.Run("attempts", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultRateLimit, RetryAfter: 1})
		e.svc.MaxAttempts = 2
		j := e.submit(t, e.tenant, "limited", docA, "v1")
		e.drain(t, e.worker("w1", false))
		got := e.job(t, j.ID)
		if got.Status != jobs.StatusFailed || got.ErrorCode != "budget_exhausted" || got.LLMAttempts != 2 {
			t.Fatalf("%s %s attempts %d", got.Status, got.ErrorCode, got.LLMAttempts)
		}
		op, err := e.db.Get(context.Background(), got.OperationID)
		if err != nil || op.Status != ops.StatusFailed {
			t.Fatalf("refused at the door every time, so nothing was billed: %v %v", op, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.svc.Deadline = time.Millisecond
		j := e.submit(t, e.tenant, "late", docA, "v1")
		time.Sleep(5 * time.Millisecond)
		e.drain(t, e.worker("w1", false))
		if got := e.job(t, j.ID); got.Status != jobs.StatusFailed || !strings.Contains(got.ErrorMessage, "deadline") {
			t.Fatalf("%s %s", got.Status, got.ErrorMessage)
		}
	})
}

func TestEventDeliveredAtLeastOnceAppliedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.submit(t, e.tenant, "event", docA, "v1")
	e.drain(t, e.worker("w1", false))
	rcv := newReceiver(t, e.db, 1)
	clock := ops.NewManualClock(time.Now())
	relay := &outbox.Relay{Store: pg.JobOutbox{DB: e.db}, Publisher: jobs.NewWebhooks([]string{rcv.url}, nil), Clock: clock}
	ctx := context.Background()
	if n, err := relay.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("first delivery should fail: %d %v", n, err)
	}
	clock.Advance(time.Minute)
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivery: %d %v", n, err)
	}
	// The relay died after the receiver answered and before it marked the event: it is
	// delivered again.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE job_outbox SET published_at = NULL, locked_until = NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("third delivery: %d %v", n, err)
	}
	deliveries, applied := rcv.counts(j.ID)
	// One refused delivery, two that went through, one application.
	if deliveries != 2 || applied != 1 {
		t.Fatalf("deliveries %d, applied %d", deliveries, applied)
	}
	if n := e.count(t, `SELECT count(*) FROM consumed_events WHERE consumer = 'sample' AND entity_id = $1`, j.ID); n != 1 {
		t.Fatalf("%d inbox rows", n)
	}
}

// A delivered job event leaves the job outbox after the keep; the job stays published
// once: running it again after the prune publishes nothing new.
func TestDeliveredJobEventsArePrunedAndTheJobStaysPublishedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.submit(t, e.tenant, "prune", docA, "v1")
	e.drain(t, e.worker("w1", false))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	clock := ops.NewManualClock(time.Now())
	relay := &outbox.Relay{Store: pg.JobOutbox{DB: e.db}, Publisher: jobs.NewWebhooks([]string{srv.URL}, nil), Clock: clock, Keep: time.Hour}
	ctx := context.Background()
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("delivery: %d %v", n, err)
	}
	clock.Advance(2 * time.Hour)
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, j.ID); n != 0 {
		t.Fatalf("%d job events left after the keep", n)
	}
	// The same submission again, and a worker pass: the job is already published.
	again := e.submit(t, e.tenant, "prune", docA, "v1")
	e.drain(t, e.worker("w2", false))
	if again.ID != j.ID {
		t.Fatalf("resubmission made job %s, want %s", again.ID, j.ID)
	}
	if n := e.count(t, `SELECT count(*) FROM job_outbox WHERE entity_id = $1`, j.ID); n != 0 {
		t.Fatalf("the published job was published again: %d events", n)
	}
}
