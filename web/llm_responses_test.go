package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

func respond(q, instructions string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "fake-small", Instructions: openai.String(instructions), MaxOutputTokens: openai.Int(24),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)}}
}

// streamed reads a Responses API stream through the SDK: the types of its events in order,
// the text of its deltas, and the response of its last event.
func streamed(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (types []string, text string, final responses.Response) {
	t.Helper()
	var b strings.Builder
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
		if ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return types, b.String(), final
}

// TestResponsesSettleExactlyOnce: POST /v1/responses through the official SDK, as JSON and
// as a stream, costs one generation per Idempotency-Key: a repeat is replayed from what was
// stored, as JSON or as the stream of events, whichever the repeat asks for (ops rule 3).
func TestResponsesSettleExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: time.Millisecond})
	c := w.sdk("shop")
	ctx := context.Background()

	var raw *http.Response
	out, err := c.Responses.New(ctx, respond("where is order 4417?", "answer as support"), keyed("r-json"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	gen := w.fake.GenerationsOf(fake.APIResponses)
	if len(gen) != 1 || out.ID != gen[0].ID || out.OutputText() != gen[0].Content || raw.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("client got %s %q, provider %+v", out.ID, out.OutputText(), gen)
	}
	again, err := c.Responses.New(ctx, respond("where is order 4417?", "answer as support"), keyed("r-json"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if again.ID != out.ID || again.OutputText() != out.OutputText() || raw.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %s, replayed %q", again.ID, raw.Header.Get("Idempotent-Replayed"))
	}
	// The stored response, streamed to a repeat that asks for a stream.
	types, text, final := streamed(t, c.Responses.NewStreaming(ctx, respond("where is order 4417?", "answer as support"), keyed("r-json")))
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" || text != out.OutputText() || final.ID != out.ID {
		t.Fatalf("replayed stream %v %q (%s)", types, text, final.ID)
	}
	// Other instructions with the key: another request, refused (the SDK does not retry a 422).
	_, err = c.Responses.New(ctx, respond("where is order 4417?", "answer as a pirate"), keyed("r-json"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("other instructions: %v", err)
	}
	op := w.waitStatus(t, "r-json", ops.StatusSucceeded) // the close follows the answer
	if op.Status != ops.StatusSucceeded || op.ProviderRef != out.ID || op.CostMicros <= 0 {
		t.Fatalf("operation %s %s cost %d", op.Status, op.ProviderRef, op.CostMicros)
	}

	// A stream: the events as the provider sends them, live, then its replay.
	types, text, final = streamed(t, c.Responses.NewStreaming(ctx, respond("and order 4418?", "answer as support"), keyed("r-stream"), option.WithResponseInto(&raw)))
	gen = w.fake.GenerationsOf(fake.APIResponses)
	if len(gen) != 2 || text != gen[1].Content || final.ID != gen[1].ID || final.OutputText() != text || raw.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("streamed %q (%s), provider %+v", text, final.ID, gen)
	}
	if types[0] != "response.created" || !contains(types, "response.output_text.delta") || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	replayed, err := c.Responses.New(ctx, respond("and order 4418?", "answer as support"), keyed("r-stream"), option.WithResponseInto(&raw))
	if err != nil || replayed.ID != final.ID || replayed.OutputText() != text || raw.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("JSON replay of the stream: %v %s %q", err, replayed.ID, replayed.OutputText())
	}
	_, text2, final2 := streamed(t, c.Responses.NewStreaming(ctx, respond("and order 4418?", "answer as support"), keyed("r-stream")))
	if text2 != text || final2.ID != final.ID || final2.Usage.OutputTokens != final.Usage.OutputTokens {
		t.Fatalf("stream replay %q (%s)", text2, final2.ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 2 {
		t.Fatalf("the provider generated %d responses, want 2", n)
	}
	if op := w.waitStatus(t, "r-stream", ops.StatusSucceeded); op.Status != ops.StatusSucceeded || op.ProviderRef != final.ID {
		t.Fatalf("operation %s %s", op.Status, op.ProviderRef)
	}
}

// The Responses route refuses what it cannot serve before anything is sent.
func TestResponsesBadInput(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	post := func(key, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	good := `{"model":"fake-small","input":"hello"}`
	wantProblem(t, post("", good), http.StatusBadRequest, llm.ReasonMissingKey)
	// A background response the provider would not keep could never be read again.
	wantProblem(t, post("r1", `{"model":"fake-small","input":"hello","background":true,"store":false}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	wantProblem(t, post("r1", `{"model":"fake-small","input":"hello","background":"yes"}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	wantProblem(t, post("r1", `{"model":"fake-small","input":"hello","stream":"yes"}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	w.generations(t, 0)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
