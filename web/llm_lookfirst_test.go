package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/recon"
)

// breakStream sends one streamed call of an interactive tenant to path whose stream the
// provider drops after its first chunks, while it goes on generating and storing the
// answer: the client has part of a stream, the operation waits for the client's retry.
func (w *lookupWorld) breakStream(t *testing.T, path, key, body string) {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Path: path, Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	req, _ := http.NewRequest(http.MethodPost, w.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
}

// TestRetryOfAnUncertainCallIsLookedUpBeforeAnyResend: the client's retry of a call whose
// attempt may have generated is not sent again while the provider holds what that attempt
// generated: a chat completion stored under the operation's id, a response under the id
// recorded on the attempt. The retry gets it, and the provider generated once (ops rule 3).
func TestRetryOfAnUncertainCallIsLookedUpBeforeAnyResend(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	ctx := context.Background()
	c := w.sdk("shop")

	w.breakStream(t, "/v1/chat/completions", "lf-chat", chatBody("what was generated once", 0, true))
	chats := w.fake.GenerationsOf(fake.APIChatCompletions)
	if len(chats) != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", len(chats))
	}
	out, err := c.Chat.Completions.New(ctx, ask("what was generated once", 0), keyed("lf-chat"))
	if err != nil || out.ID != chats[0].ID || out.Choices[0].Message.Content != chats[0].Content {
		t.Fatalf("the retry: %v %+v; the provider made %s", err, out, chats[0].ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions after the retry, want 1", n)
	}

	body := `{"model":"fake-small","input":"what was answered once","stream":true}`
	w.breakStream(t, "/v1/responses", "lf-resp", body)
	resps := w.fake.GenerationsOf(fake.APIResponses)
	if len(resps) != 1 {
		t.Fatalf("the provider generated %d responses, want 1", len(resps))
	}
	// The provider finishes the response it stores, whoever still reads its stream.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := w.up.GetResponse(ctx, resps[0].ID)
		if err == nil && s.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider's response %s: %v", resps[0].ID, err)
		}
	}
	again, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-small",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("what was answered once")}}, keyed("lf-resp"))
	if err != nil || again.ID != resps[0].ID || again.OutputText() != resps[0].Content {
		t.Fatalf("the retry: %v %+v; the provider made %s", err, again, resps[0].ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 1 {
		t.Fatalf("the provider generated %d responses after the retry, want 1", n)
	}
}

// TestAStalledCallWhoseClientIsGoneIsSettledByItsLookup: an interactive call whose stream
// broke, whose completion the provider stored, and whose client never came back is not
// released for that client at every reaper pass until its key expires: once the client's
// wait has passed, the reaper marks it unknown, the reconciler finds the completion and closes
// it with it, nothing is sent again, and a late retry of the key replays it (ops rules 3, 11).
func TestAStalledCallWhoseClientIsGoneIsSettledByItsLookup(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{reconciled: true})
	ctx := context.Background()
	w.breakStream(t, "/v1/chat/completions", "gone-chat", chatBody("a client that left", 0, true))
	chats := w.fake.GenerationsOf(fake.APIChatCompletions)
	if len(chats) != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", len(chats))
	}
	reaper := &ops.Reaper{Ledger: w.ledger, Owner: "reaper"}
	// Within the client's wait the reaper leaves the call for its client.
	w.clock.Advance(w.ledger.Limits.Lease + time.Second)
	if _, err := reaper.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if op := w.op(t, "gone-chat"); op.Status != ops.StatusInProgress {
		t.Fatalf("the call is %s within its client's wait", op.Status)
	}
	w.clock.Advance(ops.DefaultClientWait + w.ledger.Limits.Lease)
	got, err := reaper.RunOnce(ctx)
	if err != nil || got.Unknown != 1 || got.Released != 0 || got.Resent != 0 {
		t.Fatalf("the pass after the client's wait: %+v, %v", got, err)
	}
	r := &recon.Reconciler{Ledger: w.ledger, Store: w.db, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	if reps, err := r.RunOnce(ctx); err != nil || len(reps) != 1 || reps[0].Closed != 1 {
		t.Fatalf("reconciler: %+v, %v", reps, err)
	}
	if op := w.op(t, "gone-chat"); op.Status != ops.StatusSucceeded || op.ProviderRef != chats[0].ID {
		t.Fatalf("operation %s %s, want succeeded with %s", op.Status, op.ProviderRef, chats[0].ID)
	}
	c := w.sdk("shop")
	out, err := c.Chat.Completions.New(ctx, ask("a client that left", 0), keyed("gone-chat"))
	if err != nil || out.ID != chats[0].ID {
		t.Fatalf("the late retry: %v %+v", err, out)
	}
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", n)
	}
}
