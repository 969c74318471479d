package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// embed is an embeddings request of three inputs, so its cost is over a micro-dollar.
func embed(dims int64) openai.EmbeddingNewParams {
	return openai.EmbeddingNewParams{Model: openai.EmbeddingModelTextEmbedding3Large, Dimensions: openai.Int(dims),
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{
			"the parcel for order 4417 never arrived and the customer asks for a refund of the whole order",
			"order 4418 arrived damaged, the box was crushed and two of the glasses inside were broken",
			"the customer of order 4419 was charged twice for one order and wants the second charge back",
		}}}
}

// TestEmbeddingsSettleExactlyOnce: POST /v1/embeddings through the official SDK, each row
// costing exactly one upstream generation, however the client repeats itself and whatever
// the provider does (ops rule 3).
func TestEmbeddingsSettleExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{attemptTimeout: 300 * time.Millisecond, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	// call sends the row's request with its key; raw is the HTTP answer.
	call := func(tenant, key string, p openai.EmbeddingNewParams, opts ...option.RequestOption) (*openai.CreateEmbeddingResponse, *http.Response, error) {
		var raw *http.Response
		c := w.sdk(tenant)
		out, err := c.Embeddings.New(ctx, p, append([]option.RequestOption{keyed(key), option.WithResponseInto(&raw)}, opts...)...)
		return out, raw, err
	}
	// wantStatus checks the SDK's error and returns the problem's body.
	wantStatus := func(t *testing.T, err error, status int, code string) string {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("got %v, want %d %s", err, status, code)
		}
		body := string(apiErr.DumpResponse(true))
		if apiErr.StatusCode != status || !strings.Contains(body, `"code":"`+code+`"`) {
			t.Fatalf("got %s, want %d %s", body, status, code)
		}
		return body
	}
	for _, row := range []struct {
		name, key string
		run       func(t *testing.T, key string)
	}{
		{"plain", "emb-plain", func(t *testing.T, key string) {
			out, raw, err := call("shop", key, embed(256))
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Data) != 3 || len(out.Data[0].Embedding) != 256 || raw.Header.Get("Idempotent-Replayed") != "" ||
				raw.Header.Get("Settle-Operation-Id") == "" {
				t.Fatalf("%d vectors of %d, headers %v", len(out.Data), len(out.Data[0].Embedding), raw.Header)
			}
		}},
		{"same key twice: the second is replayed", "emb-twice", func(t *testing.T, key string) {
			first, _, err := call("shop", key, embed(256))
			if err != nil {
				t.Fatal(err)
			}
			again, raw, err := call("shop", key, embed(256))
			if err != nil {
				t.Fatalf("repeat: %v", err)
			}
			if raw.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("repeat: headers %v", raw.Header)
			}
			if again.Data[2].Embedding[7] != first.Data[2].Embedding[7] || again.Usage.PromptTokens != first.Usage.PromptTokens {
				t.Fatalf("the replay differs from the first answer")
			}
		}},
		{"same key, other dimensions: 422", "emb-other", func(t *testing.T, key string) {
			if _, _, err := call("shop", key, embed(256)); err != nil {
				t.Fatal(err)
			}
			_, _, err := call("shop", key, embed(512))
			wantStatus(t, err, http.StatusUnprocessableEntity, llm.ReasonKeyReused)
		}},
		{"upstream 500, resent", "emb-500", func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/embeddings", Kind: fake.LLMFaultServerError, Times: 1})
			if _, _, err := call("shop", key, embed(256)); err != nil {
				t.Fatal(err)
			}
			op := w.op(t, key)
			if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND error_code = 'upstream_500'`, op.ID); n != 1 || op.Attempts != 2 {
				t.Fatalf("%d attempts, %d of them the 500", op.Attempts, n)
			}
		}},
		{"billed, then timed out: the retry with the key sends nothing", "emb-timeout", func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/embeddings", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
			_, _, err := call("pipeline", key, embed(256), option.WithMaxRetries(0))
			wantStatus(t, err, http.StatusGatewayTimeout, llm.ReasonTimeout)
			// ops rules 5 and 11: the outcome is unknown and the key stays bound to it; the
			// provider keeps no embeddings to look up, and the client is told so (ops rule 12).
			_, _, err = call("pipeline", key, embed(256))
			if body := wantStatus(t, err, http.StatusConflict, llm.ReasonOutcomeUnknown); !strings.Contains(body, "There is nothing to look up for an embeddings call") ||
				strings.Contains(body, "completion") {
				t.Fatalf("the unknown outcome promises a lookup: %s", body)
			}
			if op := w.op(t, key); op.Status != ops.StatusUnknown || op.Attempts != 1 {
				t.Fatalf("operation %s after %d attempts", op.Status, op.Attempts)
			}
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			before := len(w.fake.GenerationsOf(fake.APIEmbeddings))
			row.run(t, row.key)
			if n := len(w.fake.GenerationsOf(fake.APIEmbeddings)) - before; n != 1 {
				t.Fatalf("the provider billed %d embedding requests, want 1", n)
			}
		})
	}
	// The plain row's operation: succeeded with the provider's request id as its record,
	// its request and route stored, its tokens priced at text-embedding-3-large's $0.13/M.
	op := w.waitStatus(t, "emb-plain", ops.StatusSucceeded) // the close follows the answer
	gens := w.fake.GenerationsOf(fake.APIEmbeddings)
	var u struct {
		PromptTokens int  `json:"prompt_tokens"`
		CostKnown    bool `json:"cost_known"`
	}
	_ = json.Unmarshal(op.Usage, &u)
	var stored struct {
		Route string `json:"route"`
	}
	_ = json.Unmarshal(op.Request, &stored)
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].RequestID || stored.Route != "/v1/embeddings" {
		t.Fatalf("operation %s %s route %q; provider %+v", op.Status, op.ProviderRef, stored.Route, gens[0])
	}
	if want := int64(math.Round(float64(gens[0].PromptTokens) * 0.13)); u.PromptTokens != gens[0].PromptTokens || !u.CostKnown || op.CostMicros != want || want == 0 {
		t.Fatalf("usage %s, cost %d micros, want %d", op.Usage, op.CostMicros, want)
	}
}

// The embeddings route refuses what it cannot serve before anything is recorded or sent.
func TestEmbeddingsBadInput(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	post := func(key, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/embeddings", strings.NewReader(body))
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
	good := `{"model":"text-embedding-3-small","input":"hello"}`
	wantProblem(t, post("", good), http.StatusBadRequest, llm.ReasonMissingKey)
	wantProblem(t, post(strings.Repeat("k", 256), good), http.StatusBadRequest, llm.ReasonInvalidKey)
	wantProblem(t, post("e1", `{"model":"text-embedding-3-small"}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	wantProblem(t, post("e1", `{"model":"text-embedding-3-small","input":[]}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	wantProblem(t, post("e1", `{"model":"text-embedding-3-small","input":"hello","stream":true}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	// A key first used for a chat completion is another request on this route (and the
	// other way round), never answered with the other route's result.
	if resp := w.post(t, "shop", "both", chatBody("hello", 0.2, false)); resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	wantProblem(t, post("both", good), http.StatusUnprocessableEntity, llm.ReasonKeyReused)
	w.generations(t, 1)
}
