package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/web"
)

// llmWorld is the gateway wired for real: Postgres, web.Server over loopback, the fake LLM
// behind it, and clients (the official SDK or raw HTTP) in front.
type llmWorld struct {
	world  *testworld.World
	db     *pg.DB
	clock  *ops.ManualClock
	fake   *fake.LLM
	base   string
	gw     *llm.Gateway
	url    string
	tokens map[string]string
}

type llmSetup struct {
	attemptTimeout time.Duration
	latency        time.Duration
	chunkDelay     time.Duration
	modes          map[string]llm.Mode
	keyScopes      map[string]llm.KeyScope
	// logger, when set, is the server's and the gateway's.
	logger  *slog.Logger
	maxBody int64
	// lease, when set, runs the ledger on the wall clock with this lease.
	lease time.Duration
	// dashboard serves the dashboard's operation pages beside the gateway.
	dashboard bool
}

// The tenants: shop and bank are interactive, pipeline is batch (when set up so), and
// open does not require an Idempotency-Key.
var llmTenants = []string{"shop", "bank", "pipeline", "open"}

func newLLMWorld(t *testing.T, o llmSetup) *llmWorld {
	t.Helper()
	s, tw := newServer(t)
	db := tw.DB
	w := &llmWorld{world: tw, db: db, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}}
	w.fake, w.base = tw.LLM(fake.LLMOptions{Seed: 1, Latency: o.latency, ChunkDelay: o.chunkDelay})
	w.gw, w.url = w.gateway(t, s, o)
	ctx := context.Background()
	for _, name := range llmTenants {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE tenants SET require_idempotency_key = false WHERE name = 'open'`); err != nil {
		t.Fatal(err)
	}
	return w
}

// gateway starts a gateway process on the world's database and provider.
func (w *llmWorld) gateway(t *testing.T, s *web.Server, o llmSetup) (*llm.Gateway, string) {
	t.Helper()
	up := w.world.Upstream(w.base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", AttemptTimeout: o.attemptTimeout})
	ledger := w.world.GatewayLedger(w.clock, o.lease)
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: up, Prices: llm.DefaultPrices(),
		TenantModes: o.modes, TenantKeyScopes: o.keyScopes, MaxBody: o.maxBody, Logger: o.logger, Refs: w.db, Streams: w.db})
	if err != nil {
		t.Fatal(err)
	}
	if o.logger != nil {
		s.Logger = o.logger
	}
	s.LLM = gw
	if o.dashboard {
		d := &desk.Desk{Ledger: ledger, Events: w.db, Audit: deskstore.New(w.db)}
		s.Operations = w.db
		s.DashboardDeps = web.DashboardDeps{Desk: d, Timelines: deskstore.New(w.db), AuditLog: deskstore.New(w.db), UserAdmin: accounts(w.db)}
	}
	return gw, w.world.Serve(s.Handler())
}

// sdk is the official OpenAI client pointed at the gateway, with its default retries.
func (w *llmWorld) sdk(tenant string) openai.Client {
	return openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens[tenant]))
}

func ask(q string, temperature float64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "fake-small", Temperature: openai.Float(temperature),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}}
}

func keyed(key string) option.RequestOption { return option.WithHeader("Idempotency-Key", key) }

func chatBody(q string, temperature float64, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": "fake-small", "temperature": temperature, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": q}}})
	return string(b)
}

// post sends a raw request; key "" sends no Idempotency-Key.
func (w *llmWorld) post(t *testing.T, tenant, key, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type problemBody struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// wantProblem checks an answer is a problem+json with that status and code.
func wantProblem(t *testing.T, resp *http.Response, status int, code string) problemBody {
	t.Helper()
	var p problemBody
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &p)
	if resp.StatusCode != status || p.Code != code || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("got %d %s %s; want %d problem+json with code %s", resp.StatusCode, resp.Header.Get("Content-Type"), b, status, code)
	}
	return p
}

func (w *llmWorld) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return w.world.Count(t, q, args...)
}

func (w *llmWorld) generations(t *testing.T, want int) []fake.Generation {
	t.Helper()
	return testworld.Generations(t, w.fake, want)
}

func (w *llmWorld) op(t *testing.T, key string) *ops.Operation {
	t.Helper()
	return w.world.Operation(t, key)
}

// waitStatus polls until the key's operation reaches status (the generation runs on after
// a client leaves).
func (w *llmWorld) waitStatus(t *testing.T, key string, status ops.Status) *ops.Operation {
	t.Helper()
	return w.world.WaitStatus(t, key, status, 10*time.Second)
}

// waitAdmitted polls until a request with key has opened its operation.
func (w *llmWorld) waitAdmitted(t *testing.T, key string) {
	t.Helper()
	w.world.WaitAdmitted(t, key)
}

// newGatedLLMWorld is an llmWorld whose gateway reaches the provider through an
// upstreamGate holding its first call.
func newGatedLLMWorld(t *testing.T) (*llmWorld, *upstreamGate) {
	t.Helper()
	s, tw := newServer(t)
	w := &llmWorld{world: tw, db: tw.DB, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}}
	var base string
	w.fake, base = tw.LLM(fake.LLMOptions{Seed: 1})
	g := newUpstreamGate(t, base, 1)
	w.base = g.url
	w.gw, w.url = w.gateway(t, s, llmSetup{})
	t.Cleanup(g.release)
	w.tokens["shop"] = tw.Token(tw.Tenant("shop"), "test")
	return w, g
}

// sseText reads a raw SSE answer and returns the text of its first choice, the number of
// chunks and whether [DONE] ended it.
func sseText(t *testing.T, r io.Reader) (string, int, bool) {
	t.Helper()
	var text strings.Builder
	n := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			return text.String(), n, true
		}
		n++
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	return text.String(), n, false
}

func TestLLMTwoIdenticalRequestsAtOnceOneGeneration(t *testing.T) {
	t.Parallel()
	t.Run("409 then replay, through the SDK's retries", func(t *testing.T) {
		t.Parallel()
		w, gate := newGatedLLMWorld(t)
		c := w.sdk("shop")
		var wg sync.WaitGroup
		texts := make([]string, 2)
		resps := make([]*http.Response, 2)
		errs := make([]error, 2)
		send := func(i int) {
			wg.Go(func() {
				out, err := c.Chat.Completions.New(context.Background(), ask("summarise the call with customer 4417", 0.2),
					keyed("msg-4417-1"), option.WithResponseInto(&resps[i]))
				errs[i] = err
				if err == nil {
					texts[i] = out.Choices[0].Message.Content
				}
			})
		}
		// The first call is held on its way to the provider until the second was told the
		// key is in flight: a provider quicker than the second client's arrival would close
		// the call first, and the second would be replayed without a 409.
		send(0)
		gate.waitHeld(t, 1)
		send(1)
		for deadline := time.Now().Add(10 * time.Second); w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'in_progress'`) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				gate.release()
				wg.Wait()
				t.Fatalf("the second request was not told the key is in flight within 10 s: errors %v, %v", errs[0], errs[1])
			}
		}
		gate.release()
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("errors %v, %v", errs[0], errs[1])
		}
		gens := w.generations(t, 1)
		if texts[0] != gens[0].Content || texts[1] != gens[0].Content {
			t.Fatalf("clients got %q and %q, the provider generated %q", texts[0], texts[1], gens[0].Content)
		}
		if resps[1].Header.Get("Idempotent-Replayed") != "true" || resps[0].Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("Idempotent-Replayed: first %q, second %q", resps[0].Header.Get("Idempotent-Replayed"), resps[1].Header.Get("Idempotent-Replayed"))
		}
		// A JSON answer, fresh or replayed, says its length: no chunked framing to read.
		for i, r := range resps {
			if r.ContentLength <= 0 || len(r.TransferEncoding) > 0 {
				t.Fatalf("answer %d: Content-Length %d, Transfer-Encoding %v", i, r.ContentLength, r.TransferEncoding)
			}
		}
		op := w.waitStatus(t, "msg-4417-1", ops.StatusSucceeded) // the close follows the answer
		if op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID || op.ProviderRequestID != gens[0].RequestID {
			t.Fatalf("operation %+v", op)
		}
		// Every client request is recorded with how it was answered: new, 409 at least
		// once, then the replay.
		if n := w.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND answer = 'in_progress'`, op.ID); n < 1 {
			t.Fatalf("%d requests answered in_progress", n)
		}
		if n := w.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND answer = 'replayed'`, op.ID); n != 1 {
			t.Fatalf("%d requests answered replayed", n)
		}
		if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, op.ID); n != 1 {
			t.Fatalf("%d attempts", n)
		}
	})
}

func TestLLMStreamCutByClientAtLastChunkThenRetry(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{latency: 150 * time.Millisecond, chunkDelay: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(chatBody("summarise the ticket", 0.2, true)))
	req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "msg-cut")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"finish_reason":"stop"`) {
			break // the last chunk: the network breaks before [DONE]
		}
	}
	cancel()
	resp.Body.Close()

	op := w.waitStatus(t, "msg-cut", ops.StatusSucceeded)
	c := w.sdk("shop")
	var raw *http.Response
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake-small", Temperature: openai.Float(0.2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("summarise the ticket")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, keyed("msg-cut"), option.WithResponseInto(&raw))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	gens := w.generations(t, 1)
	if acc.Choices[0].Message.Content != gens[0].Content || acc.ID != gens[0].ID || raw.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry streamed %q (%s), provider generated %q (%s); replayed %q", acc.Choices[0].Message.Content, acc.ID, gens[0].Content, gens[0].ID, raw.Header.Get("Idempotent-Replayed"))
	}
	if acc.Usage.CompletionTokens != int64(gens[0].CompletionTokens) {
		t.Fatalf("replayed usage %+v, provider billed %d completion tokens", acc.Usage, gens[0].CompletionTokens)
	}
	// The same stored completion, as JSON to a non-streaming retry.
	out, err := c.Chat.Completions.New(context.Background(), ask("summarise the ticket", 0.2), keyed("msg-cut"))
	if err != nil || out.Choices[0].Message.Content != gens[0].Content {
		t.Fatalf("non-streaming retry: %v %+v", err, out)
	}
	w.generations(t, 1)
	// An attempt's finish is audited by an audit row or, finished by its sender, on its row.
	if n := w.count(t, `SELECT (SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'attempt.ok')
		+ (SELECT count(*) FROM attempts WHERE operation_id = $1::uuid AND outcome = 'ok' AND audit_id IS NOT NULL)`, op.ID); n != 1 {
		t.Errorf("%d audit entries attempt.ok", n)
	}
	var usage struct {
		CompletionTokens int  `json:"completion_tokens"`
		CostKnown        bool `json:"cost_known"`
	}
	_ = json.Unmarshal(op.Usage, &usage)
	if usage.CompletionTokens != 24 || !usage.CostKnown || op.CostMicros <= 0 {
		t.Fatalf("usage %s cost %d", op.Usage, op.CostMicros)
	}
}

func TestLLMSameKeyAnotherTemperatureIs422(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	if resp := w.post(t, "shop", "k-temp", chatBody("hello", 0.2, false)); resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	wantProblem(t, w.post(t, "shop", "k-temp", chatBody("hello", 0.9, false)), http.StatusUnprocessableEntity, llm.ReasonKeyReused)
	// The SDK does not retry a 422.
	c := w.sdk("shop")
	_, err := c.Chat.Completions.New(context.Background(), ask("hello", 0.9), keyed("k-temp"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("SDK got %v", err)
	}
	w.generations(t, 1)
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'conflict'`); n != 2 {
		t.Fatalf("%d conflicts recorded", n)
	}
}

func TestLLMBadInput(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{maxBody: 4096})
	good := chatBody("hello", 0.2, false)
	t.Run("malformed JSON", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", "k1", `{"model":`), http.StatusBadRequest, llm.ReasonMalformedJSON)
	})
	t.Run("no messages", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", "k1", `{"model":"fake-small","messages":[]}`), http.StatusBadRequest, llm.ReasonInvalidRequest)
	})
	t.Run("body over the limit", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", "k1", chatBody(strings.Repeat("word ", 1000), 0.2, false)), http.StatusRequestEntityTooLarge, llm.ReasonBodyTooLarge)
	})
	t.Run("not JSON", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", "k1", good, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, llm.ReasonUnsupportedType)
	})
	t.Run("missing key", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", "", good), http.StatusBadRequest, llm.ReasonMissingKey)
	})
	t.Run("bad keys", func(t *testing.T) {
		wantProblem(t, w.post(t, "shop", strings.Repeat("k", 256), good), http.StatusBadRequest, llm.ReasonInvalidKey)
		wantProblem(t, w.post(t, "shop", "ключ", good), http.StatusBadRequest, llm.ReasonInvalidKey)
		req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(good))
		req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("Idempotency-Key", "a")
		req.Header.Add("Idempotency-Key", "b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		wantProblem(t, resp, http.StatusBadRequest, llm.ReasonInvalidKey)
	})
	t.Run("no token", func(t *testing.T) {
		resp, err := http.Post(w.url+"/v1/chat/completions", "application/json", strings.NewReader(good))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		wantProblem(t, resp, http.StatusUnauthorized, ops.EUNAUTHORIZED)
	})
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND kind = 'llm_call'`); n != 8 {
		t.Fatalf("%d rejected requests recorded, want 8", n)
	}
	w.generations(t, 0)
}

func TestLLMStreamingThroughTheSDK(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: time.Millisecond})
	c := w.sdk("shop")
	var raw *http.Response
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake-small", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream it")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, keyed("s-1"), option.WithResponseInto(&raw))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	gens := w.generations(t, 1)
	if acc.Choices[0].Message.Content != gens[0].Content || acc.Usage.PromptTokens != int64(gens[0].PromptTokens) ||
		raw.Header.Get("Idempotent-Replayed") != "" || raw.Header.Get("Settle-Provider-Request-Id") != gens[0].RequestID {
		t.Fatalf("streamed %q usage %+v headers %v; provider %+v", acc.Choices[0].Message.Content, acc.Usage, raw.Header, gens[0])
	}
	out, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake-small", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream it")},
	}, keyed("s-1"))
	if err != nil || out.Choices[0].Message.Content != gens[0].Content || out.Usage.CompletionTokens != int64(gens[0].CompletionTokens) {
		t.Fatalf("non-streaming replay: %v %+v", err, out)
	}
	w.generations(t, 1)
}
