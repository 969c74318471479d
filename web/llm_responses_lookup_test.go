package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/recon"
)

// brokenResponse sends a batch Responses call whose stream the provider drops after its
// first events while it goes on generating and stores the response: the operation is
// unknown, its attempt names the response, and the provider holds it completed.
func (w *lookupWorld) brokenResponse(t *testing.T, key string) (*ops.Operation, fake.Generation) {
	t.Helper()
	before := len(w.fake.GenerationsOf(fake.APIResponses))
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/responses",
		strings.NewReader(`{"model":"fake-small","input":"summarise ticket `+key+`","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+w.tokens["pipeline"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	op := w.op(t, key)
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s after the broken stream, want unknown", op.Status)
	}
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if len(gens) != before+1 {
		t.Fatalf("the provider generated %d responses, want %d", len(gens), before+1)
	}
	// The provider finishes the response it stores, whoever still reads its stream.
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
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
	w := newLookupWorld(t, lookupSetup{reconciled: true})
	ctx := context.Background()
	op, gen := w.brokenResponse(t, "resp-desk")
	if ok, why := w.desk.CanLookUp(ctx, op); !ok {
		t.Fatalf("no lookup offered for a response: %s", why)
	}
	out, err := w.desk.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed {
		t.Fatalf("desk lookup: %+v, %v", out, err)
	}
	if got := w.op(t, "resp-desk"); got.Status != ops.StatusSucceeded || got.ProviderRef != gen.ID || len(got.Result) == 0 {
		t.Fatalf("operation %s %s after the lookup", got.Status, got.ProviderRef)
	}
	c := w.sdk("pipeline")
	again, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-small",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("summarise ticket resp-desk")}}, keyed("resp-desk"))
	if err != nil || again.ID != gen.ID || again.OutputText() != gen.Content {
		t.Fatalf("the retry: %v %+v", err, again)
	}

	op2, gen2 := w.brokenResponse(t, "resp-recon")
	r := &recon.Reconciler{Ledger: w.ledger, Store: w.db, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	reps, err := r.RunOnce(ctx)
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
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultServerError, Chunk: 3, Times: 1})
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/responses",
		strings.NewReader(`{"model":"fake-small","input":"summarise ticket resp-failed","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+w.tokens["pipeline"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "resp-failed")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	op3 := w.op(t, "resp-failed")
	if op3.Status != ops.StatusUnknown {
		t.Fatalf("operation %s after the failed stream, want unknown", op3.Status)
	}
	failed := w.fake.GenerationsOf(fake.APIResponses)[2]
	out, err = w.desk.Lookup(ctx, op3.ID, "oncall@example.com")
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
