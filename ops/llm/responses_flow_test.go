package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

const responsesRoute = "/v1/responses"

// response is the Responses API answer a call replied with, failing the test on an error
// or an answer that is not one.
func response(t *testing.T, r *reply, err error) responses.Response {
	t.Helper()
	var out responses.Response
	if err != nil || r.head.Stream || json.Unmarshal(r.body.Bytes(), &out) != nil || out.ID == "" {
		t.Fatalf("the call answered %v %+v %s; want a response", err, r.head, r.body.Bytes())
	}
	return out
}

// The provider's stream fails part-way (an error event, then response.failed): the client
// gets what came and Settle's error event; the retry with the key goes on with the same
// operation, a possible duplicate, since the provider billed the failed one.
func TestResponsesStreamFailsThenRetry(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: time.Millisecond})
	w.fake.AddFault(fake.LLMFault{Path: responsesRoute, Kind: fake.LLMFaultServerError, Chunk: 4, Times: 1})
	r, err := w.callOn(w.gw, responsesRoute, "shop", "r-fail", `{"model":"fake-small","input":"hello","stream":true}`, "")
	b := r.body.String()
	if err != nil || !r.head.Stream || !strings.HasPrefix(b, "event: response.created\n") ||
		!strings.Contains(b, "event: error\ndata: ") || strings.Contains(b, "response.completed") {
		t.Fatalf("got %v %+v %s", err, r.head, b)
	}
	op := w.op(t, "r-fail")
	failed := w.fake.GenerationsOf(fake.APIResponses)[0]
	if op.Status != ops.StatusInProgress || w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND error_code = 'upstream_stream_error'`, op.ID) != 1 {
		t.Fatalf("operation %s after the failed stream", op.Status)
	}
	// The failed attempt names the response the provider made (and billed), recorded from its
	// first event, and the provider's own record is read by that id, as a lookup would.
	ctx := context.Background()
	refs, err := w.db.AttemptRefs(ctx, op.ID)
	if err != nil || refs[1] != failed.ID {
		t.Fatalf("attempt ids %v, %v; the provider made %s", refs, err, failed.ID)
	}
	up := oai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	if got, err := up.Responses.Get(ctx, refs[1], responses.ResponseGetParams{}); err != nil || got.Status != "failed" {
		t.Fatalf("the provider's record of %s: %v %+v", refs[1], err, got)
	}
	r, err = w.callOn(w.gw, responsesRoute, "shop", "r-fail", `{"model":"fake-small","input":"hello"}`, "")
	out := response(t, r, err)
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if len(gens) != 2 || out.ID != gens[1].ID || out.ID == failed.ID {
		t.Fatalf("retry: %s; provider %+v", out.ID, gens)
	}
	if w.gw.Stats().PossibleDuplicates != 1 {
		t.Fatalf("stats %+v", w.gw.Stats())
	}
}

// TestResponsesIDIsRecordedAtOnce: the response id the provider names in a stream's first
// event is on the attempt while the stream still runs, before anything else is known of it.
func TestResponsesIDIsRecordedAtOnce(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 60 * time.Millisecond})
	var (
		first       string
		refs        map[int]string
		refsErr     error
		midStream   ops.Status
		watchedOnce bool
	)
	out := &reply{written: func(p []byte) {
		if watchedOnce {
			return
		}
		// What a client has read when the stream's first event reaches it.
		watchedOnce = true
		first = string(p)
		op := w.op(t, "r-early")
		midStream = op.Status
		refs, refsErr = w.db.AttemptRefs(context.Background(), op.ID)
	}}
	r, err := w.callInto(out, w.gw, responsesRoute, "shop", "r-early", `{"model":"fake-small","input":"hello","stream":true}`, "")
	if err != nil || !strings.HasPrefix(first, "event: response.created") {
		t.Fatalf("first event %q, %v", first, err)
	}
	if refsErr != nil || refs[1] == "" || !strings.HasPrefix(refs[1], "resp_") || midStream != ops.StatusInProgress {
		t.Fatalf("mid-stream: operation %s, attempt ids %v, %v", midStream, refs, refsErr)
	}
	if !strings.Contains(r.body.String(), "event: response.completed") {
		t.Fatalf("the stream ended %s", r.body.String())
	}
	if op := w.waitStatus(t, "r-early", ops.StatusSucceeded); op.ProviderRef != refs[1] {
		t.Fatalf("the answer is %s, the attempt named %s", op.ProviderRef, refs[1])
	}
}

// brokenResponse sends a batch Responses call whose stream the provider drops after its
// first events while it goes on generating and stores the response: the operation is
// unknown, its attempt names the response, and the provider holds it completed.
func (w *gatewayWorld) brokenResponse(t *testing.T, key string) (*ops.Operation, fake.Generation) {
	t.Helper()
	before := len(w.fake.GenerationsOf(fake.APIResponses))
	w.fake.AddFault(fake.LLMFault{Path: responsesRoute, Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	if r, err := w.callOn(w.gw, responsesRoute, "pipeline", key, `{"model":"fake-small","input":"summarise ticket `+key+`","stream":true}`, ""); err != nil || !r.began {
		t.Fatalf("the streamed call: %v, answer began %v", err, r.began)
	}
	op := w.op(t, key)
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s after the broken stream, want unknown", op.Status)
	}
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if len(gens) != before+1 {
		t.Fatalf("the provider generated %d responses, want %d", len(gens), before+1)
	}
	// The provider finishes the response it stores, whoever still reads its stream.
	up := oai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := up.Responses.Get(context.Background(), gens[before].ID, responses.ResponseGetParams{})
		if err == nil && got.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider's response %s: %v", gens[before].ID, err)
		}
	}
	return op, gens[before]
}

// TestResponsesUnknownAreLookedUpByTheirID: a Responses call whose stream broke is settled by
// reading the response its attempt recorded (GET /v1/responses/{id}), from the desk and by the
// reconciler, never by a resend: it closes as succeeded with the response stored, and the
// client's retry with its key replays it; a response the provider failed closes as failed
// with its record (ops rules 3, 6 and 9).
func TestResponsesUnknownAreLookedUpByTheirID(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, reconciled: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	ctx := context.Background()
	op, gen := w.brokenResponse(t, "resp-desk")
	if ok, why := d.CanLookUp(ctx, op); !ok {
		t.Fatalf("no lookup offered for a response: %s", why)
	}
	out, err := d.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed {
		t.Fatalf("desk lookup: %+v, %v", out, err)
	}
	if got := w.op(t, "resp-desk"); got.Status != ops.StatusSucceeded || got.ProviderRef != gen.ID || len(got.Result) == 0 {
		t.Fatalf("operation %s %s after the lookup", got.Status, got.ProviderRef)
	}
	r, err := w.callOn(w.gw, responsesRoute, "pipeline", "resp-desk", `{"model":"fake-small","input":"summarise ticket resp-desk"}`, "")
	if again := response(t, r, err); again.ID != gen.ID || again.OutputText() != gen.Content {
		t.Fatalf("the retry: %+v", again)
	}

	op2, gen2 := w.brokenResponse(t, "resp-recon")
	rc := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&openai.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	reps, err := rc.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].Looked != 1 || reps[0].Closed != 1 {
		t.Fatalf("reconciler: %+v, %v", reps, err)
	}
	if got := w.op(t, "resp-recon"); got.Status != ops.StatusSucceeded || got.ProviderRef != gen2.ID {
		t.Fatalf("operation %s %s after reconciliation", got.Status, got.ProviderRef)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'explained_unknown' AND operation_id = $1`, op2.ID); n != 1 {
		t.Fatalf("%d explained_unknown exceptions, want 1", n)
	}
	if gens := w.fake.GenerationsOf(fake.APIResponses); len(gens) != 2 {
		t.Fatalf("the provider generated %d responses, want 2: nothing was resent", len(gens))
	}

	// A response the provider failed part-way closes as failed with its record.
	w.fake.AddFault(fake.LLMFault{Path: responsesRoute, Kind: fake.LLMFaultServerError, Chunk: 3, Times: 1})
	if r, err := w.callOn(w.gw, responsesRoute, "pipeline", "resp-failed", `{"model":"fake-small","input":"summarise ticket resp-failed","stream":true}`, ""); err != nil || !r.began {
		t.Fatalf("the streamed call: %v, answer began %v", err, r.began)
	}
	op3 := w.op(t, "resp-failed")
	if op3.Status != ops.StatusUnknown {
		t.Fatalf("operation %s after the failed stream, want unknown", op3.Status)
	}
	failed := w.fake.GenerationsOf(fake.APIResponses)[2]
	out, err = d.Lookup(ctx, op3.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed || !strings.Contains(out.Message, "failed") {
		t.Fatalf("desk lookup of a failed response: %+v, %v", out, err)
	}
	if got := w.op(t, "resp-failed"); got.Status != ops.StatusFailed {
		t.Fatalf("operation %s after the lookup of a failed response", got.Status)
	}
	if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup' AND provider_ref = $2`, op3.ID, failed.ID); n != 1 {
		t.Fatalf("%d lookups recorded with the provider's record of the failed response, want 1", n)
	}
	if gens := w.fake.GenerationsOf(fake.APIResponses); len(gens) != 3 {
		t.Fatalf("the provider generated %d responses, want 3: nothing was resent", len(gens))
	}
}
