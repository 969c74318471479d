package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/recon"
)

// TestLLMLookupSettlesABilledTimeout: the provider billed and stored the completion, the
// client timed out. The retry is told the truth (an on-call person can look it up), a
// lookup finds the completion and closes the operation with it, and the client's retry
// with the same key replays the stored text, as JSON through openai-go and as a stream,
// with no second generation.
func TestLLMLookupSettlesABilledTimeout(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	op, gen := w.billedThenTimedOut(t, "doc-1", "classify document 1")
	if !gen.Stored || gen.Metadata[llm.MetaOperation] != op.ID || gen.Metadata[llm.MetaTenant] != strconv.FormatInt(op.TenantID, 10) {
		t.Fatalf("the provider stored %+v", gen)
	}
	p := wantProblem(t, w.post(t, "pipeline", "doc-1", chatBody("classify document 1", 0, false)), http.StatusConflict, llm.ReasonOutcomeUnknown)
	if !strings.Contains(p.Detail, "on-call person looks it up") || strings.Contains(p.Detail, "reconciler") {
		t.Fatalf("the 409 says %q", p.Detail)
	}

	out, err := w.desk.Lookup(context.Background(), op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed || !strings.Contains(out.Message, "replays it") {
		t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
	}
	op = w.op(t, "doc-1")
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gen.ID || len(op.Result) == 0 || op.CostMicros <= 0 {
		t.Fatalf("operation %s %s, result %s, cost %d", op.Status, op.ProviderRef, op.Result, op.CostMicros)
	}

	var raw *http.Response
	c := w.sdk("pipeline")
	got, err := c.Chat.Completions.New(context.Background(), ask("classify document 1", 0), keyed("doc-1"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != gen.ID || got.Choices[0].Message.Content != gen.Content || raw.Header.Get("Idempotent-Replayed") != "true" ||
		got.Usage.CompletionTokens != int64(gen.CompletionTokens) {
		t.Fatalf("the retry got %s %q (replayed %q), want %s %q", got.ID, got.Choices[0].Message.Content,
			raw.Header.Get("Idempotent-Replayed"), gen.ID, gen.Content)
	}
	resp := w.post(t, "pipeline", "doc-1", chatBody("classify document 1", 0, true))
	if text, _, done := sseText(t, resp.Body); resp.StatusCode != http.StatusOK || text != gen.Content || !done {
		t.Fatalf("the streamed retry got %d %q (done %v), want %q", resp.StatusCode, text, done, gen.Content)
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
	w := newLookupWorld(t, lookupSetup{})
	op, gen := w.billedThenTimedOut(t, "doc-2", "classify document 2")
	other := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	second, err := other.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake-small",
		Store: openai.Bool(true), Metadata: shared.Metadata{llm.MetaOperation: op.ID, llm.MetaTenant: strconv.FormatInt(op.TenantID, 10)},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("classify document 2")}})
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(1)
	out, err := w.desk.Lookup(context.Background(), op.ID, "oncall@example.com")
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
	rows, err := w.db.ReconMetrics(context.Background(), recon.MetricsFilter{Bucket: time.Hour,
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
// replays it; when it does not, the key answers 410 answer_not_stored, never a 500. A
// completion of another operation is refused.
func TestLLMPersonsCloseNeverBreaksTheKey(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	ctx := context.Background()
	op, gen := w.billedThenTimedOut(t, "doc-3", "classify document 3")
	lost, _ := w.billedThenTimedOut(t, "doc-4", "classify document 4")
	if _, err := w.desk.CloseManually(ctx, desk.ManualClose{ID: lost.ID, Version: lost.Version, To: ops.StatusSucceeded,
		ProviderRef: gen.ID, Note: "wrong one", Actor: "oncall@example.com"}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("closing with another operation's completion: %v", err)
	}
	closed, err := w.desk.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: gen.ID, Note: "Found it in the provider's logs.", Actor: "oncall@example.com"})
	if err != nil || len(closed.Op.Result) == 0 {
		t.Fatalf("close: %v, result %+v", err, closed)
	}
	c := w.sdk("pipeline")
	got, err := c.Chat.Completions.New(ctx, ask("classify document 3", 0), keyed("doc-3"))
	if err != nil || got.ID != gen.ID || got.Choices[0].Message.Content != gen.Content {
		t.Fatalf("the retry after the close: %v %+v", err, got)
	}

	if _, err := w.desk.CloseManually(ctx, desk.ManualClose{ID: lost.ID, Version: lost.Version, To: ops.StatusSucceeded,
		ProviderRef: "chatcmpl-fromtheinvoice", Note: "The invoice lists it.", Actor: "oncall@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		p := wantProblem(t, w.post(t, "pipeline", "doc-4", chatBody("classify document 4", 0, stream)), http.StatusGone, llm.ReasonAnswerNotStored)
		if !strings.Contains(p.Detail, "new Idempotency-Key") {
			t.Fatalf("answer_not_stored says %q", p.Detail)
		}
	}
	w.generations(t, 2)
}

// TestLLMUnknownSaysOnlyWhatWillHappen: the 409 of an unknown outcome promises the
// reconciler's lookup only when the provider stores completions and a reconciler runs; a
// provider that refuses store gets plain calls, and both the 409 and the lookup say a
// person must settle it by hand.
func TestLLMUnknownSaysOnlyWhatWillHappen(t *testing.T) {
	t.Parallel()
	t.Run("stored and reconciled", func(t *testing.T) {
		t.Parallel()
		w := newLookupWorld(t, lookupSetup{reconciled: true})
		w.billedThenTimedOut(t, "doc-5", "classify document 5")
		p := wantProblem(t, w.post(t, "pipeline", "doc-5", chatBody("classify document 5", 0, false)), http.StatusConflict, llm.ReasonOutcomeUnknown)
		if !strings.Contains(p.Detail, "the reconciler looks this one up") {
			t.Fatalf("the 409 says %q", p.Detail)
		}
	})
	t.Run("provider without stored completions", func(t *testing.T) {
		t.Parallel()
		w := newLookupWorld(t, lookupSetup{noStore: true, reconciled: true})
		op, gen := w.billedThenTimedOut(t, "doc-6", "classify document 6")
		if gen.Stored {
			t.Fatal("a provider that refuses store was asked to store")
		}
		p := wantProblem(t, w.post(t, "pipeline", "doc-6", chatBody("classify document 6", 0, false)), http.StatusConflict, llm.ReasonOutcomeUnknown)
		if strings.Contains(p.Detail, "looks") || !strings.Contains(p.Detail, "by hand") {
			t.Fatalf("the 409 says %q", p.Detail)
		}
		out, err := w.desk.Lookup(context.Background(), op.ID, "oncall@example.com")
		if err != nil || out.Outcome != desk.LookupUnsupported || !strings.Contains(out.Message, "does not store completions") {
			t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
		}
		c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
		_, page := w.dash.page(t, c, "/ops/"+op.ID)
		mustContain(t, page, `data-testid="lookup-note"`, "does not store completions")
		if strings.Contains(page, `data-testid="lookup-button"`) {
			t.Fatal("the page offers a lookup the provider cannot answer")
		}
	})
}

// TestOpPageTellsWhatEachKeyProtects: an llm_call's page never calls a resend safe nor
// says the provider keeps keys (it takes none); it says how long Settle replays the
// client's key, and its close form asks for a completion id. A job's page names its dedup
// key, and a refund's still counts down Stripe's retention.
func TestOpPageTellsWhatEachKeyProtects(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	call, _ := w.billedThenTimedOut(t, "doc-9", "classify document 9")
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	_, page := w.dash.page(t, c, "/ops/"+call.ID)
	mustContain(t, page, "fake-llm takes no idempotency key", "may be billed twice", "Settle replays the client's key until",
		`placeholder="chatcmpl-..."`, "Completion id", `data-testid="lookup-button"`)
	for _, wrong := range []string{"keeps keys for", "is safe until", "re_..."} {
		if strings.Contains(page, wrong) {
			t.Fatalf("the llm_call page says %q", wrong)
		}
	}

	ctx := context.Background()
	job := &ops.Operation{ID: ops.NewOperationID(), TenantID: call.TenantID, Kind: ops.KindLLMJob, Provider: "fake-llm",
		IntentKey: "job:dedup-1", ProviderKey: ops.NewProviderKey(), Fingerprint: "dedup-1"}
	if _, err := w.db.Open(ctx, ops.OpenParams{Op: job, Now: w.clock.Now(), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	_, page = w.dash.page(t, c, "/ops/"+job.ID)
	mustContain(t, page, "fake-llm takes no idempotency key", "dedup key", `placeholder="chatcmpl-..."`)
	if strings.Contains(page, "keeps keys for") || strings.Contains(page, "keys for none") {
		t.Fatal("the llm_job page claims the provider keeps keys")
	}

	refund := &ops.Operation{ID: ops.NewOperationID(), TenantID: call.TenantID, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: "order-1", ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", OrderRef: "1", AmountCents: 100, Currency: "usd",
		Retention: 24 * time.Hour}
	if _, err := w.db.Open(ctx, ops.OpenParams{Op: refund, Now: w.clock.Now(), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	_, page = w.dash.page(t, c, "/ops/"+refund.ID)
	mustContain(t, page, "stripe keeps idempotency keys for 1d 0h", `placeholder="re_..."`)
}

// TestLLMBulkLookupClosesCalls: "Look up at provider" on everything matching the
// Unknown queue closes the LLM calls whose completions the provider stored.
func TestLLMBulkLookupClosesCalls(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	a, _ := w.billedThenTimedOut(t, "doc-11", "classify document 11")
	b, _ := w.billedThenTimedOut(t, "doc-12", "classify document 12")
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	resp, err := c.PostForm(w.url+"/ops/lookup", map[string][]string{"scope": {"filter"}, "tab": {"unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := w.dash.runBulk(t, 20); n != 1 {
		t.Fatalf("%d bulk lookups ran, want 1", n)
	}
	_, page := w.dash.page(t, c, bulkLocation(t, resp))
	mustContain(t, page, `data-testid="bulk-closed">2<`, `data-testid="bulk-need-person">0<`, `data-state="done"`)
	for _, op := range []*ops.Operation{a, b} {
		if got := w.dash.get(t, op.ID); got.Status != ops.StatusSucceeded || len(got.Result) == 0 {
			t.Fatalf("operation %s is %s after the bulk lookup", op.ID, got.Status)
		}
	}
}
