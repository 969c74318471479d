package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
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
	d := &desk.Desk{Ledger: w.Ledger, Events: e.db, Audit: deskstore.New(e.db), Findings: reconstore.New(e.db),
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

// TestUncertainGenerationIsLookedUpBeforeAnyResend: the provider billed and stored a job's
// generation, then its answer never came, under the policy that allows a resend. Before
// sending again the worker asks the provider's stored completions, finds the generation its
// first attempt made, and publishes the job with it: one generation billed, no second
// attempt, no possible duplicate (ops rule 3).
func TestUncertainGenerationIsLookedUpBeforeAnyResend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", true)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "billed-then-lost", docA, "v1")
	e.drain(t, w)

	gens := e.fake.Generations()
	if len(gens) != 1 {
		t.Fatalf("the provider billed %d generations, want the one the lost answer was: %+v", len(gens), gens)
	}
	got := e.job(t, j.ID)
	var res struct {
		Summary      string `json:"summary"`
		CompletionID string `json:"completion_id"`
	}
	_ = json.Unmarshal(got.Result, &res)
	if got.Status != jobs.StatusPublished || res.Summary != gens[0].Content || res.CompletionID != gens[0].ID {
		t.Fatalf("job %s (%s), result %s; want published with the stored completion %s", got.Status, got.ErrorCode, got.Result, gens[0].ID)
	}
	if got.LLMAttempts != 1 || got.PossibleDuplicates != 0 {
		t.Fatalf("job counts %d attempts and %d possible duplicates, want 1 and 0", got.LLMAttempts, got.PossibleDuplicates)
	}
	ctx := context.Background()
	op, err := e.db.Get(ctx, got.OperationID)
	if err != nil || op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID {
		t.Fatalf("operation %+v %v", op, err)
	}
	atts, err := e.db.Attempts(ctx, op.ID)
	if err != nil || len(atts) != 1 || atts[0].Outcome != ops.OutcomeTimeout {
		t.Fatalf("attempts %+v %v; want the one timeout, nothing sent after it", atts, err)
	}
	if n := e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup' AND provider_ref = $2`, op.ID, gens[0].ID); n != 1 {
		t.Fatalf("%d lookups recorded as the evidence that found %s, want 1", n, gens[0].ID)
	}
	if n := e.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1 AND charge_ref = $2`, op.ID, gens[0].ID); n != 1 {
		t.Fatalf("%d provider charges recorded for the generation found, want 1", n)
	}
}

// TestResendAfterALookupThatFindsNothingIsCounted: the provider billed the first attempt but
// shows its stored copy only a minute later, so the lookup before the resend finds nothing.
// The policy's resend then goes, and is counted as the possible duplicate it is: Settle
// says what it knows, never that the lookup proved nothing was generated (ops rule 12).
func TestResendAfterALookupThatFindsNothingIsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1, Lag: time.Minute})
	w := e.worker("w1", true)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	j := e.submit(t, e.tenant, "stored-late", docA, "v1")
	e.drain(t, w)

	got := e.job(t, j.ID)
	if n := len(e.fake.Generations()); got.Status != jobs.StatusPublished || n != 2 {
		t.Fatalf("job %s (%s) with %d generations; want published after the resend", got.Status, got.ErrorCode, n)
	}
	if got.LLMAttempts != 2 || got.PossibleDuplicates != 1 {
		t.Fatalf("job counts %d attempts and %d possible duplicates, want 2 and 1", got.LLMAttempts, got.PossibleDuplicates)
	}
	if n := e.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND n = 2 AND possible_duplicate`, got.OperationID); n != 1 {
		t.Fatal("the resend is not recorded as a possible duplicate")
	}
}

// TestUncertainGenerationIsNotResentWhileTheProviderCannotBeAsked: the first attempt was
// billed and its answer lost, and the provider's stored completions cannot be read. Nothing
// is sent again: the job waits, saying why, and once the store answers it finds the
// generation and is published with it (ops rule 3).
func TestUncertainGenerationIsNotResentWhileTheProviderCannotBeAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 10 * time.Second, Times: 1})
	w := e.worker("w1", true)
	w.Upstream = e.world.Upstream(e.base, openai.Config{APIKey: "sk-test", AttemptTimeout: 300 * time.Millisecond})
	w.Lookups = &llm.Lookups{Ledger: w.Ledger, Events: e.db, Store: unreadableStore{}, Prices: llm.DefaultPrices()}
	j := e.submit(t, e.tenant, "store-down", docA, "v1")
	ctx := context.Background()
	if n, err := w.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("run: %d jobs, %v", n, err)
	}
	got := e.job(t, j.ID)
	if got.Status != jobs.StatusQueued || got.ErrorCode != ops.ReasonNotLookedUp || !strings.Contains(got.ErrorMessage, "nothing is sent again") {
		t.Fatalf("job %s (%s: %s), want queued until the provider can be asked", got.Status, got.ErrorCode, got.ErrorMessage)
	}
	if n := len(e.fake.Generations()); n != 1 {
		t.Fatalf("%d generations while the provider could not be asked, want the first only", n)
	}
	op, err := e.db.Get(ctx, got.OperationID)
	if err != nil || op.Status != ops.StatusInProgress || op.Attempts != 1 || op.Leased(time.Now()) {
		t.Fatalf("operation %+v %v; want in progress with its one attempt, released", op, err)
	}

	w.Lookups = nil // the upstream's own store, which answers
	e.drain(t, w)
	gens := e.fake.Generations()
	got = e.job(t, j.ID)
	var res struct {
		CompletionID string `json:"completion_id"`
	}
	_ = json.Unmarshal(got.Result, &res)
	if len(gens) != 1 || got.Status != jobs.StatusPublished || res.CompletionID != gens[0].ID {
		t.Fatalf("job %s (%s) with result %s after %d generations; want published with %s", got.Status, got.ErrorCode, got.Result, len(gens), gens[0].ID)
	}
}

// unreadableStore is a provider's store of completions that stores them but cannot be read.
type unreadableStore struct{}

func (unreadableStore) Name() string                         { return "openai" }
func (unreadableStore) StoreState(context.Context) llm.Store { return llm.StoreOn }
func (unreadableStore) GetStored(context.Context, string) (*llm.Stored, error) {
	return nil, errors.New("503 from the provider")
}
func (unreadableStore) FindStored(context.Context, string) ([]llm.Stored, error) {
	return nil, errors.New("503 from the provider")
}
