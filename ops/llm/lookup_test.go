package llm_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// lookupDesk is the desk the on-call person settles the world's calls with: its lookups go
// to the provider's stored completions.
func (w *gatewayWorld) lookupDesk() *desk.Desk {
	return &desk.Desk{Ledger: w.ledger, Events: w.db, Audit: deskstore.New(w.db), Completions: w.lookups, Findings: reconstore.New(w.db), Bulk: deskstore.New(w.db)}
}

// TestLLMLookupSettlesABilledTimeout: the provider billed and stored the completion, the
// client timed out. The retry is told the truth (an on-call person can look it up), a
// lookup finds the completion and closes the operation with it, and the client's retry
// with the same key replays the stored text, as JSON and as a stream, with no second
// generation.
func TestLLMLookupSettlesABilledTimeout(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	op, gen := w.billedThenTimedOut(t, "doc-1", "classify document 1")
	if !gen.Stored || gen.Metadata[llm.MetaOperation] != op.ID || gen.Metadata[llm.MetaTenant] != strconv.FormatInt(op.TenantID, 10) {
		t.Fatalf("the provider stored %+v", gen)
	}
	r, err := w.call("pipeline", "doc-1", chatBody("classify document 1", 0, false))
	if said := wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown); !strings.Contains(said, "on-call person looks it up") || strings.Contains(said, "reconciler") {
		t.Fatalf("the refusal says %q", said)
	}

	out, err := d.Lookup(context.Background(), op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed || !strings.Contains(out.Message, "replays it") {
		t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
	}
	op = w.op(t, "doc-1")
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gen.ID || len(op.Result) == 0 || op.CostMicros <= 0 {
		t.Fatalf("operation %s %s, result %s, cost %d", op.Status, op.ProviderRef, op.Result, op.CostMicros)
	}

	r, err = w.call("pipeline", "doc-1", chatBody("classify document 1", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	var got oai.ChatCompletion
	if err := json.Unmarshal(r.body.Bytes(), &got); err != nil || len(got.Choices) == 0 {
		t.Fatalf("the retry answered %s: %v", r.body.Bytes(), err)
	}
	if got.ID != gen.ID || got.Choices[0].Message.Content != gen.Content || !r.head.Replayed ||
		got.Usage.CompletionTokens != int64(gen.CompletionTokens) {
		t.Fatalf("the retry got %s %q (replayed %v), want %s %q", got.ID, got.Choices[0].Message.Content,
			r.head.Replayed, gen.ID, gen.Content)
	}
	r, err = w.call("pipeline", "doc-1", chatBody("classify document 1", 0, true))
	if text, _, done := streamText(t, r); err != nil || !r.head.Stream || text != gen.Content || !done {
		t.Fatalf("the streamed retry got %v %q (done %v), want %q", err, text, done, gen.Content)
	}
	w.generations(t, 1)
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1 AND charge_ref = $2`, op.ID, gen.ID); n != 1 {
		t.Fatalf("%d provider charges for the completion found, want 1", n)
	}
}

// TestLLMLookupFindsADoubleGeneration: two stored completions carry one operation's id
// (another process sent it again). The lookup closes the operation with the first and
// raises the double generation as an exception, with both charges recorded.
func TestLLMLookupFindsADoubleGeneration(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	op, gen := w.billedThenTimedOut(t, "doc-2", "classify document 2")
	other := oai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	second, err := other.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "fake-small",
		Store: oai.Bool(true), Metadata: shared.Metadata{llm.MetaOperation: op.ID, llm.MetaTenant: strconv.FormatInt(op.TenantID, 10)},
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("classify document 2")}})
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(1)
	out, err := d.Lookup(context.Background(), op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed || len(out.Records) != 2 || !strings.Contains(out.Message, "double generation") {
		t.Fatalf("lookup: %s %q %d records %v", out.Outcome, out.Message, len(out.Records), err)
	}
	if got := w.op(t, "doc-2"); got.ProviderRef != gen.ID {
		t.Fatalf("closed with %s, want the first generation %s", got.ProviderRef, gen.ID)
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, op.ID); n != 2 {
		t.Fatalf("%d charges recorded, want 2", n)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'double_charge' AND operation_id = $1
		AND $2 = ANY(charge_refs) AND $3 = ANY(charge_refs)`, op.ID, gen.ID, second.ID); n != 1 {
		t.Fatalf("%d double-charge exceptions, want 1", n)
	}
	// The reconciliation table and /insights count the second generation as a double
	// charge and what it cost as money lost, in USD, though a stored completion has no price.
	closed := w.op(t, "doc-2")
	rows, err := rollupstore.New(w.db).ReconMetrics(context.Background(), recon.MetricsFilter{Bucket: time.Hour,
		Window: recon.Window{From: closed.CreatedAt.Add(-time.Hour), To: closed.CreatedAt.Add(time.Hour)}, Kind: ops.KindLLMCall})
	if err != nil {
		t.Fatal(err)
	}
	var doubles, lost int64
	for _, r := range rows {
		doubles += r.DoubleCharges
		lost += r.Lost["usd"]
	}
	if doubles != 1 || closed.CostMicros <= 0 || lost != closed.CostMicros {
		t.Fatalf("reconciliation counts %d double charges losing %d micro-USD; want 1 losing the generation's %d", doubles, lost, closed.CostMicros)
	}
}

// TestLLMPersonsCloseNeverBreaksTheKey: a person closes an unknown call as succeeded with
// the completion id. When the provider has it, Settle stores its answer and the key
// replays it. A completion of another operation is refused, and so is one the provider,
// which stores the call, does not hold: the key still says the outcome is unknown. When the
// provider keeps no copy to ask about (the client sent store: false), the close stands on
// the person's word and the key answers answer_not_stored (which web answers 410), never an
// internal error.
func TestLLMPersonsCloseNeverBreaksTheKey(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	ctx := context.Background()
	op, gen := w.billedThenTimedOut(t, "doc-3", "classify document 3")
	lost, _ := w.billedThenTimedOut(t, "doc-4", "classify document 4")
	if _, err := d.CloseManually(ctx, desk.ManualClose{ID: lost.ID, Version: lost.Version, To: ops.StatusSucceeded,
		ProviderRef: gen.ID, Note: "wrong one", Actor: "oncall@example.com"}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("closing with another operation's completion: %v", err)
	}
	closed, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: gen.ID, Note: "Found it in the provider's logs.", Actor: "oncall@example.com"})
	if err != nil || len(closed.Op.Result) == 0 {
		t.Fatalf("close: %v, result %+v", err, closed)
	}
	r, err := w.call("pipeline", "doc-3", chatBody("classify document 3", 0, false))
	if id, content := completion(t, r, err); id != gen.ID || content != gen.Content {
		t.Fatalf("the retry after the close: %s %q", id, content)
	}

	// ops rule 9
	if _, err := d.CloseManually(ctx, desk.ManualClose{ID: lost.ID, Version: lost.Version, To: ops.StatusSucceeded,
		ProviderRef: "chatcmpl-fromtheinvoice", Note: "The invoice lists it.", Actor: "oncall@example.com"}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("closing with a completion the provider does not hold: %v", err)
	}
	r, err = w.call("pipeline", "doc-4", chatBody("classify document 4", 0, false))
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown)

	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	unstored := `{"model":"fake-small","store":false,"messages":[{"role":"user","content":"classify document 5"}]}`
	r, err = w.call("pipeline", "doc-5", unstored)
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	optedOut := w.op(t, "doc-5")
	if _, err := d.CloseManually(ctx, desk.ManualClose{ID: optedOut.ID, Version: optedOut.Version, To: ops.StatusSucceeded,
		ProviderRef: "chatcmpl-fromtheinvoice", Note: "The invoice lists it.", Actor: "oncall@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		body := unstored
		if stream {
			body = strings.Replace(unstored, `"store":false`, `"store":false,"stream":true`, 1)
		}
		// ops rule 12
		r, err := w.call("pipeline", "doc-5", body)
		if said := wantRefused(t, r, err, ops.ENOTFOUND, llm.ReasonAnswerNotStored); !strings.Contains(said, "new Idempotency-Key") {
			t.Fatalf("answer_not_stored says %q", said)
		}
	}
	w.generations(t, 3)
}
