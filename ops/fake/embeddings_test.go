package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/settle-dev/settle/ops/fake"
)

func norm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// TestEmbeddingsThroughTheSDK: the official SDK gets one unit vector per input, derived from
// the input alone, the same as floats or base64, shortened on request, with usage; every
// request is one billed generation of the embeddings API.
func TestEmbeddingsThroughTheSDK(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{})
	c := sdkFor(base)
	ctx := context.Background()
	texts := []string{"refund for order 4417", "where is my parcel"}
	embed := func(p openai.EmbeddingNewParams) *openai.CreateEmbeddingResponse {
		t.Helper()
		r, err := c.Embeddings.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	floats := embed(openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if len(floats.Data) != 2 || floats.Data[1].Index != 1 || len(floats.Data[0].Embedding) != 1536 ||
		math.Abs(norm(floats.Data[0].Embedding)-1) > 1e-5 || floats.Usage.PromptTokens != 8 || floats.Usage.TotalTokens != 8 {
		t.Fatalf("embeddings: %d items, usage %+v", len(floats.Data), floats.Usage)
	}
	b64 := embed(openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
	one := embed(openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[1])}})
	for i, x := range floats.Data[1].Embedding {
		if b64.Data[1].Embedding[i] != x || one.Data[0].Embedding[i] != x {
			t.Fatalf("component %d: float %v, base64 %v, alone %v; want one vector per text", i, x, b64.Data[1].Embedding[i], one.Data[0].Embedding[i])
		}
	}
	if floats.Data[0].Embedding[0] == floats.Data[1].Embedding[0] {
		t.Fatal("two texts got the same vector")
	}
	short := embed(openai.EmbeddingNewParams{Model: "text-embedding-3-small", Dimensions: openai.Int(8),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[1])}})
	v := short.Data[0].Embedding
	if len(v) != 8 || math.Abs(norm(v)-1) > 1e-5 || math.Abs(v[0]/v[1]-one.Data[0].Embedding[0]/one.Data[0].Embedding[1]) > 1e-4 {
		t.Fatalf("shortened vector %v is not the start of the full one, rescaled", v)
	}
	tokens := embed(openai.EmbeddingNewParams{Model: "text-embedding-3-large",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2, 3}, {4, 5}}}})
	if len(tokens.Data) != 2 || len(tokens.Data[0].Embedding) != 3072 || tokens.Usage.PromptTokens != 5 {
		t.Fatalf("token arrays: %d items of %d, usage %+v", len(tokens.Data), len(tokens.Data[0].Embedding), tokens.Usage)
	}
	var apiErr *openai.Error
	_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-ada-002", Dimensions: openai.Int(8),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("dimensions on ada-002: %v", err)
	}
	gens := l.GenerationsOf(fake.APIEmbeddings)
	if len(gens) != 5 || gens[0].PromptTokens != 8 || gens[0].Model != "text-embedding-3-small" || len(l.Generations()) != 5 {
		t.Fatalf("ledger %+v", gens)
	}
}

// TestEmbeddingsFaultsAndUsage: the fault rules strike embeddings too, and the usage report
// of embeddings counts what was billed, apart from the completions report.
func TestEmbeddingsFaultsAndUsage(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	l, base := startLLM(t, fake.LLMOptions{Clock: clock.Now})
	faults, err := fake.ParseLLMFaults("/v1/embeddings rate_limit calls=1; /v1/embeddings drop_stream calls=2")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range faults {
		l.AddFault(f)
	}
	c := sdkFor(base)
	ctx := context.Background()
	p := openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a b c")}}
	var apiErr *openai.Error
	if _, err := c.Embeddings.New(ctx, p); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first call: %v", err)
	}
	if _, err := c.Embeddings.New(ctx, p); err == nil || errors.As(err, &apiErr) {
		t.Fatalf("second call: %v; want a broken connection", err)
	}
	if _, err := c.Embeddings.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	if gens := l.GenerationsOf(fake.APIEmbeddings); len(gens) != 2 || gens[0].Fault != "drop_stream" {
		t.Fatalf("ledger %+v", gens)
	}
	chat(t, http.DefaultClient, base, question)
	report := func(path string) (tokens, requests int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/organization/usage/%s?bucket_width=1d&start_time=%d", base, path, clock.Now().Add(-time.Hour).Unix()), nil)
		req.Header.Set("Authorization", "Bearer "+llmKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page struct {
			Data []struct {
				Results []struct {
					InputTokens      int `json:"input_tokens"`
					NumModelRequests int `json:"num_model_requests"`
				} `json:"results"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Data {
			for _, r := range b.Results {
				tokens, requests = tokens+r.InputTokens, requests+r.NumModelRequests
			}
		}
		return tokens, requests
	}
	if tokens, n := report("embeddings"); tokens != 6 || n != 2 {
		t.Fatalf("embeddings report: %d tokens in %d requests", tokens, n)
	}
	if _, n := report("completions"); n != 1 {
		t.Fatalf("completions report: %d requests", n)
	}
}
