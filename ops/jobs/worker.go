package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Named points of a job's run where Hooks.AtPoint is called. Tests use them to kill a
// worker there and check that another one takes over without a second generation or
// publication.
const (
	// CrashAfterResponse is right after the model's answer arrived, before it is written.
	CrashAfterResponse = "after_response"
	// CrashAfterResult is right after the generation is written to the ledger, before the
	// later stages.
	CrashAfterResult = "after_result"
	// CrashAfterPublish is right after the publish transaction committed, before the job's
	// lease is given back and before the event is delivered.
	CrashAfterPublish = "after_publish"
)

// CrashPoints lists the named points of a job's run.
var CrashPoints = []string{CrashAfterResponse, CrashAfterResult, CrashAfterPublish}

// DocumentSource fetches a document sent by hash and reference.
type DocumentSource interface {
	Fetch(ctx context.Context, ref string) ([]byte, error)
}

// Worker claims jobs and runs their stages. Several workers, in one process or many, may
// run at once: claims skip rows others hold, and every write is guarded by the lease.
type Worker struct {
	Store Store
	// Ledger records the generations; build it with NewLedger. Its lease is the job's.
	Ledger *ops.Ledger
	// Upstream is the LLM provider adapter, the same one the gateway uses.
	Upstream llm.Upstream
	// Lookups asks the provider what a generation's uncertain attempt made before it is
	// sent again (ops rule 3). Nil: the Upstream's own store of completions when it keeps
	// one (ops/openai does), with the charges found recorded in Events.
	Lookups *llm.Lookups
	// Events records the provider charges a lookup finds, so reconciliation and the alerts
	// count the generation it found; the ledger's store is one. Nil records none.
	Events ops.EventStore
	Prices *llm.PriceTable
	// Budgets holds a job back while its tenant's LLM spend of the day reached its budget,
	// as the gateway refuses its calls; nil checks no budget.
	Budgets *llm.Budgets
	Catalog *Catalog
	// Owner names this worker in leases and audit rows; unique per worker.
	Owner     string
	Documents DocumentSource
	// ValidatorVersion is the validator's code version; a new one validates again.
	ValidatorVersion string
	MaxSummaryChars  int
	// Poll is the pause when no job is due; default 500 ms.
	Poll time.Duration
	// SweepEvery is how often a worker with nothing to claim looks for jobs left unknown
	// beside a closed operation (Store.RequeueStranded); default one minute.
	SweepEvery time.Duration
	// Hooks are set by tests only; nil in production.
	Hooks  WorkerHooks
	Sleep  ops.Sleeper
	Logger *slog.Logger
	// Runs counts the jobs Process ran, by outcome; nil counts none.
	Runs *Runs

	lastSweep atomic.Int64 // the clock's UnixNano at the last sweep
}

// WorkerHooks are calls a test binary installs into a worker. Production leaves them nil.
type WorkerHooks struct {
	// AtPoint is called at each named point of a job's run (see CrashPoints), e.g. to kill
	// the process there with SIGKILL.
	AtPoint func(point string)
}

// Loop is the worker's background loop: it processes jobs one after the other, and looks
// again every Poll when none is due. A job in hand when the loop stops is finished first:
// its generation is paid for whether or not anyone waits for it.
func (w *Worker) Loop() *ops.Loop {
	poll := w.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	return ops.NewLoop(w.Logger, "job worker "+w.Owner, poll, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		n, err := w.RunOnce(ctx)
		return n > 0, err
	})
}

// RunOnce claims one due job and processes it, and says how many it processed.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	now := w.Ledger.Clock.Now()
	js, err := w.Store.ClaimJobs(ctx, w.Owner, now, now.Add(w.Ledger.Limits.Lease), 1)
	if err != nil {
		return 0, fmt.Errorf("claim jobs: %w", err)
	}
	for _, j := range js {
		if err := w.Process(ctx, j); err != nil {
			w.logger().Warn("job stopped", "job", j.ID, "worker", w.Owner, "err", err)
		}
	}
	if len(js) == 0 {
		w.sweep(ctx, now)
	}
	return len(js), nil
}

// TryReuse publishes a just-submitted job at once when its dedup key already has a
// succeeded generation, and returns the job as it is then. Otherwise it leaves the job to
// the workers.
func (w *Worker) TryReuse(ctx context.Context, j *Job) (*Job, error) {
	op, err := w.Store.LatestForIntent(ctx, j.TenantID, ops.KindLLMJob, IntentKey(j.DedupKey))
	if ops.ErrorCode(err) == ops.ENOTFOUND || (err == nil && (op.Status != ops.StatusSucceeded || op.PurgedAt != nil)) {
		// Nothing kept to answer from: the workers generate it.
		return j, nil
	}
	if err != nil {
		return j, err
	}
	now := w.Ledger.Clock.Now()
	owner := ops.NewOwner("api", j.ID)
	claimed, err := w.Store.ClaimJob(ctx, j.ID, owner, now, now.Add(w.Ledger.Limits.Lease))
	if ops.ErrorCode(err) == ops.ECONFLICT {
		return j, nil
	}
	if err != nil {
		return j, err
	}
	r := &run{w: w, j: claimed, owner: owner, noSend: true}
	if err := r.do(ctx); err != nil {
		return j, err
	}
	return w.Store.GetJob(ctx, 0, j.ID)
}

// Process runs a claimed job's stages from the first one without a checkpoint.
func (w *Worker) Process(ctx context.Context, j *Job) error {
	r := &run{w: w, j: j, owner: w.Owner}
	err := r.do(ctx)
	w.Runs.ran(r.outcome(err))
	return err
}

// lookups is Lookups, or the Upstream's store of completions read on this worker's ledger.
func (w *Worker) lookups() *llm.Lookups {
	if w.Lookups != nil {
		return w.Lookups
	}
	k := &llm.Lookups{Ledger: w.Ledger, Prices: w.Prices}
	k.Store, _ = w.Upstream.(llm.StoredCompletions)
	k.Events = w.Events
	return k
}

// logger is Logger, given when the worker is built; without one (a test that calls
// RunOnce) it logs nothing, never to the process's global logger.
func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// atPoint calls the test hook of a named point, if one is set.
func (w *Worker) atPoint(point string) {
	if w.Hooks.AtPoint != nil {
		w.Hooks.AtPoint(point)
	}
}

// errParked ends a run after the job was moved out of running (queued, unknown, failed).
var errParked = errors.New("job parked")

// run is one worker's pass over one claimed job.
type run struct {
	w     *Worker
	j     *Job
	owner string
	// noSend is set for the API's reuse path, which never calls the provider.
	noSend bool
	// spentReason says which budget ended the sends, when one did.
	spentReason string
	// parked says the run left its job in a status of its own (errParked).
	parked bool
}

func (r *run) now() time.Time { return r.w.Ledger.Clock.Now() }

func (r *run) do(ctx context.Context) error {
	// The job's stages go on after a shutdown signal: a generation in flight is paid for.
	bg := context.WithoutCancel(ctx)
	stop := r.holdJob(bg)
	defer stop()
	err := r.stages(ctx, bg)
	if errors.Is(err, errParked) {
		r.parked = true
		return nil
	}
	return err
}

func (r *run) stages(ctx, bg context.Context) error {
	text, err := r.extract(bg)
	if err != nil {
		return err
	}
	if text == "" {
		// A document fetched by reference may hold no word; it is not worth a generation.
		return r.fail(bg, ReasonBadDocument, "The document holds no word to summarise.")
	}
	chunks, err := r.chunk(bg, text)
	if err != nil {
		return err
	}
	gen, attempt, err := r.generate(ctx, bg, chunks)
	if err != nil {
		return err
	}
	v, err := r.validate(bg, gen, attempt)
	if err != nil {
		return err
	}
	return r.publish(bg, gen, v, attempt)
}

// extract is text_extracted: the document's normalised text.
func (r *run) extract(ctx context.Context) (string, error) {
	j := r.j
	var out struct {
		Text string `json:"text"`
	}
	if ok, err := r.reuse(ctx, StageTextExtracted, j.DocumentHash, extractVersion, &out); err != nil || ok {
		return out.Text, err
	}
	raw := j.DocumentText
	if raw == "" {
		if r.w.Documents == nil {
			return "", r.fail(ctx, "document_unavailable", "The document was sent by reference and no document source is configured.")
		}
		b, err := r.w.Documents.Fetch(ctx, j.DocumentRef)
		if err != nil {
			return "", r.requeue(ctx, r.w.Ledger.Limits.Lease, "document_unavailable", "Fetching the document failed: "+err.Error())
		}
		if hashBytes(b) != j.DocumentHash {
			return "", r.fail(ctx, ReasonHashMismatch, "The document at the reference does not have the hash sent with it.")
		}
		raw = string(b)
	}
	out.Text = extractText(raw)
	return out.Text, r.save(ctx, StageTextExtracted, j.DocumentHash, extractVersion, CheckpointOK, 0,
		map[string]any{"text": out.Text, "chars": len(out.Text)})
}

// chunk is chunks_ready: the text split for the prompt.
func (r *run) chunk(ctx context.Context, text string) ([]string, error) {
	size := r.catalog().ChunkSize
	version := fmt.Sprintf("%s/%d", chunkVersion, size)
	in := hashBytes([]byte(text))
	var out struct {
		Chunks []string `json:"chunks"`
	}
	if ok, err := r.reuse(ctx, StageChunksReady, in, version, &out); err != nil || ok {
		return out.Chunks, err
	}
	out.Chunks = chunkText(text, size)
	return out.Chunks, r.save(ctx, StageChunksReady, in, version, CheckpointOK, 0, map[string]any{"chunks": out.Chunks, "count": len(out.Chunks)})
}

// generate is llm_done: the generation of the job's dedup key, made once and shared.
func (r *run) generate(ctx, bg context.Context, chunks []string) (*generation, int, error) {
	j, cat := r.j, r.catalog()
	prof := cat.Profiles[j.ModelProfile]
	body := chatBody(cat.Prompts[j.Pipeline][j.PromptVersion], prof, chunks)
	in := hashBytes(body)
	var gen generation
	if ok, err := r.reuse(bg, StageLLMDone, in, llmVersion, &gen); err != nil || ok {
		if ok && j.OperationID != gen.OperationID {
			// Another job's generation answers this one: record it as its duplicate request.
			op, err := r.w.Ledger.Get(bg, gen.OperationID)
			if err != nil {
				return nil, 0, fmt.Errorf("read generation %s: %w", gen.OperationID, err)
			}
			if err := r.join(bg, op); err != nil {
				return nil, 0, err
			}
		}
		return &gen, 0, err
	}
	op, err := r.computation(ctx, bg, body)
	if err != nil {
		return nil, 0, err
	}
	switch op.Status {
	case ops.StatusSucceeded:
		if len(op.Result) == 0 {
			// The success holds its dedup key for good, so no other key generates it again.
			return nil, 0, r.fail(bg, "result_unavailable", fmt.Sprintf("Operation %s was closed as succeeded without the generation's text, and it answers every job of this document, pipeline, prompt version and model profile, whatever its key, until the purge removes it; another prompt version or model profile is a new computation.", op.ID))
		}
		c, err := parseCompletion(op.Result)
		if err != nil {
			return nil, 0, r.fail(bg, "result_unavailable", "The stored generation could not be read.")
		}
		gen = generation{Summary: *c.Content, CompletionID: c.ID, ProviderRequestID: op.ProviderRequestID,
			Model: c.Model, OperationID: op.ID, CostMicros: op.CostMicros}
		if err := r.save(bg, StageLLMDone, in, llmVersion, CheckpointOK, op.Attempts, gen); err != nil {
			return nil, 0, err
		}
		return &gen, op.Attempts, nil
	case ops.StatusFailed:
		_ = r.save(bg, StageLLMDone, in, llmVersion, CheckpointFailed, op.Attempts, map[string]any{"operation_id": op.ID})
		if r.spentReason != "" {
			return nil, 0, r.fail(bg, "budget_exhausted", "The job's retry budget is spent ("+r.spentReason+"); every attempt was refused before it was billed.")
		}
		return nil, 0, r.fail(bg, "generation_failed", r.failedWhy(bg, op))
	case ops.StatusUnknown, ops.StatusExpired:
		_ = r.save(bg, StageLLMDone, in, llmVersion, CheckpointUnknown, op.Attempts, map[string]any{"operation_id": op.ID})
		_, err := r.change(bg, JobChange{Status: StatusUnknown, OperationID: op.ID, ErrorCode: "outcome_unknown",
			ErrorMessage: fmt.Sprintf("The generation's outcome is unknown: the provider may have billed it. Nothing more is sent until the reconciler or a person settles operation %s.", op.ID)})
		if err != nil {
			return nil, 0, err
		}
		return nil, 0, errParked
	default:
		// Another worker is generating this dedup key right now: look again shortly.
		return nil, 0, r.requeue(bg, r.w.Ledger.Limits.Lease/4, "", "")
	}
}

// failedWhy says why a generation failed, no more than Settle knows: a refusal by the
// provider, or a person's close while the provider may still have generated it.
func (r *run) failedWhy(ctx context.Context, op *ops.Operation) string {
	if atts, err := r.w.Ledger.Attempts(ctx, op.ID); err == nil && ops.Uncertain(atts) {
		return fmt.Sprintf("Operation %s was closed as failed by %s, but the provider may have generated it; this computation is not sent again before %s.",
			op.ID, op.ClosedBy, op.ClosedAt.Add(failedHold).UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("The provider refused the generation (operation %s).", op.ID)
}

// validate is validated: the generation checked by the current validator version.
func (r *run) validate(ctx context.Context, gen *generation, attempt int) (*validation, error) {
	version := r.w.ValidatorVersion
	if version == "" {
		version = DefaultValidatorVersion
	}
	in := hashBytes([]byte(gen.Summary))
	var v validation
	if ok, err := r.reuse(ctx, StageValidated, in, version, &v); err != nil || ok {
		if ok && !v.Valid {
			return nil, r.fail(ctx, "validation_failed", "The generation did not pass validation.")
		}
		return &v, err
	}
	maxChars := r.w.MaxSummaryChars
	if maxChars == 0 {
		maxChars = 4000
	}
	v = validate(gen.Summary, maxChars)
	status := CheckpointOK
	if !v.Valid {
		status = CheckpointFailed
	}
	if err := r.save(ctx, StageValidated, in, version, status, attempt, v); err != nil {
		return nil, err
	}
	if !v.Valid {
		return nil, r.fail(ctx, "validation_failed", "The generation did not pass validation.")
	}
	return &v, nil
}

// publish is published: the job's result, its checkpoint and its event in one transaction.
func (r *run) publish(ctx context.Context, gen *generation, v *validation, attempt int) error {
	j := r.j
	now := r.now()
	version := r.w.ValidatorVersion
	if version == "" {
		version = DefaultValidatorVersion
	}
	result := mustJSON(map[string]any{"summary": v.Summary, "words": v.Words, "model": gen.Model,
		"operation_id": gen.OperationID, "completion_id": gen.CompletionID, "validator": version})
	eventID := uuid.Must(uuid.NewV7()).String()
	payload := mustJSON(map[string]any{"event_id": eventID, "job_id": j.ID, "tenant_id": j.TenantID,
		"idempotency_key": j.IdempotencyKey, "dedup_key": j.DedupKey, "status": StatusPublished,
		"pipeline": j.Pipeline, "prompt_version": j.PromptVersion, "model_profile": j.ModelProfile,
		"operation_id": gen.OperationID, "result": result, "published_at": now})
	cp := Checkpoint{InputHash: hashJSON([]string{j.ID, hashBytes(result)}), CodeVersion: publishVersion, Attempt: attempt,
		Result: mustJSON(map[string]any{"event_id": eventID, "topic": TopicPublished})}
	_, published, err := r.w.Store.PublishJob(ctx, PublishParams{Job: j, Owner: r.owner, Now: now, Result: result,
		Checkpoint: cp, EventID: eventID, Payload: payload})
	if err != nil {
		return fmt.Errorf("publish job %s: %w", j.ID, err)
	}
	if published {
		r.w.atPoint(CrashAfterPublish)
	}
	return nil
}

// reuse loads the ok checkpoint of a stage for this input and code version into out.
func (r *run) reuse(ctx context.Context, stage Stage, in, version string, out any) (bool, error) {
	cp, err := r.w.Store.FindCheckpoint(ctx, r.j.DedupKey, stage, in, version)
	if ops.ErrorCode(err) == ops.ENOTFOUND || (err == nil && cp.Status != CheckpointOK && stage != StageValidated) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find %s checkpoint: %w", stage, err)
	}
	if err := json.Unmarshal(cp.Result, out); err != nil {
		return false, nil // an unreadable checkpoint is done again
	}
	return true, nil
}

func (r *run) save(ctx context.Context, stage Stage, in, version, status string, attempt int, result any) error {
	now := r.now()
	err := r.w.Store.SaveCheckpoint(ctx, Checkpoint{TenantID: r.j.TenantID, DedupKey: r.j.DedupKey, JobID: r.j.ID, Stage: stage,
		InputHash: in, CodeVersion: version, Status: status, Attempt: attempt, Result: mustJSON(result), CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return fmt.Errorf("save %s checkpoint: %w", stage, err)
	}
	return nil
}

// change applies a guarded change to the job and keeps the run's copy current.
func (r *run) change(ctx context.Context, c JobChange) (*Job, error) {
	c.ID, c.Owner, c.Now = r.j.ID, r.owner, r.now()
	if c.Status == StatusRunning && c.ErrorCode == "" {
		c.ErrorCode, c.ErrorMessage = r.j.ErrorCode, r.j.ErrorMessage
	}
	j, err := r.w.Store.ChangeJob(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("change job %s: %w", r.j.ID, err)
	}
	r.j = j
	return j, nil
}

func (r *run) fail(ctx context.Context, code, msg string) error {
	if _, err := r.change(ctx, JobChange{Status: StatusFailed, ErrorCode: code, ErrorMessage: msg}); err != nil {
		return err
	}
	r.w.logger().Info("job failed", "job", r.j.ID, "code", code)
	return errParked
}

func (r *run) requeue(ctx context.Context, after time.Duration, code, msg string) error {
	at := r.now().Add(after)
	if _, err := r.change(ctx, JobChange{Status: StatusQueued, RunAfter: &at, ErrorCode: code, ErrorMessage: msg}); err != nil {
		return err
	}
	return errParked
}

func (r *run) catalog() *Catalog {
	if r.w.Catalog != nil {
		return r.w.Catalog
	}
	return DefaultCatalog()
}
