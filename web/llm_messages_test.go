package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	upstream "github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
)

// messagesWorld is the gateway wired for Anthropic's Messages API: Postgres, web.Server over
// loopback, the fake Anthropic behind it, and the official Anthropic SDK or raw HTTP in
// front. shop is interactive and pipeline batch.
type messagesWorld struct {
	world  *testworld.World
	db     *pg.DB
	fake   *fake.Anthropic
	gw     *llm.Gateway
	url    string
	tokens map[string]string
}

// upstreamKey is the gateway's own key at the fake Anthropic.
const upstreamKey = "sk-ant-api03-settle-upstream"

func newMessagesWorld(t *testing.T, attemptTimeout time.Duration) *messagesWorld {
	t.Helper()
	s, tw := newServer(t)
	w := &messagesWorld{world: tw, db: tw.DB, tokens: map[string]string{}}
	w.fake = fake.NewAnthropic(fake.AnthropicOptions{ChunkDelay: time.Millisecond, Words: 12})
	base, err := w.fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.fake.Close() })
	up, err := upstream.New(upstream.Config{BaseURL: base, APIKey: upstreamKey, AttemptTimeout: attemptTimeout})
	if err != nil {
		t.Fatal(err)
	}
	w.gw, err = llm.New(llm.Config{Ledger: tw.GatewayLedger(ops.NewManualClock(time.Now()), 0), Upstreams: map[string]llm.Upstream{"/v1/messages": up}, Prices: llm.DefaultPrices(),
		TenantModes: map[string]llm.Mode{"pipeline": llm.Batch}, Refs: tw.DB, Streams: tw.DB})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = w.gw
	w.url = tw.Serve(s.Handler())
	for _, name := range []string{"shop", "pipeline"} {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	return w
}

// sdk is the official Anthropic client pointed at Settle with a tenant's Settle token as its
// API key (sent as a bearer token), without retries of its own unless opts add them.
func (w *messagesWorld) sdk(tenant string, opts ...aoption.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(w.url), aoption.WithAPIKey(w.tokens[tenant]),
		aoption.WithMaxRetries(0)}, opts...)...)
	return &c
}

func (w *messagesWorld) op(t *testing.T, key string) *ops.Operation {
	t.Helper()
	return w.world.Operation(t, key)
}

// waitStatus polls until the key's operation reaches status: a call's close is written
// after its client had the answer.
func (w *messagesWorld) waitStatus(t *testing.T, key string, status ops.Status) *ops.Operation {
	t.Helper()
	return w.world.WaitStatus(t, key, status, 10*time.Second)
}

func (w *messagesWorld) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return w.world.Count(t, q, args...)
}

// post sends a raw Messages API request with hdr as pairs of names and values.
func (w *messagesWorld) post(t *testing.T, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// claudeAsk is a question behind a system prompt marked for the prompt cache, to a model of
// the price table.
func claudeAsk(q string) anthropic.MessageNewParams {
	system := strings.Repeat("You answer customers of the shop about their orders and refunds. ", 8)
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		System:   []anthropic.TextBlockParam{{Text: system, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}}
}

// accumulate reads a Messages API stream through the SDK: the message it makes, the types of
// its events, and the error that ended it, if any.
func accumulate(t *testing.T, st interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) (anthropic.Message, []string, error) {
	t.Helper()
	var acc anthropic.Message
	var types []string
	for st.Next() {
		types = append(types, st.Current().Type)
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	return acc, types, st.Err()
}

// wantAnthropicError checks an SDK error: its status, its error type and Settle's code in
// Anthropic's error shape; it returns the message.
func wantAnthropicError(t *testing.T, err error, status int, typ, code string) string {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want %d %s", err, status, code)
	}
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
	if apiErr.StatusCode != status || body.Type != "error" || body.Error.Type != typ || body.Error.Details.ErrorCode != code {
		t.Fatalf("got %d %s; want %d %s with error_code %s", apiErr.StatusCode, apiErr.RawJSON(), status, typ, code)
	}
	return body.Error.Message
}

// TestMessagesSettleExactlyOnce: POST /v1/messages through the official Anthropic SDK costs
// one upstream generation per Idempotency-Key however the client repeats itself and whatever
// Anthropic does, and exactly one in every row where the policy forbids a resend; where the
// interactive policy resends a call whose stream broke, the resend is counted as a possible
// duplicate (ops rules 3 and 5).
func TestMessagesSettleExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newMessagesWorld(t, 300*time.Millisecond)
	ctx := context.Background()
	keyed := func(k string) aoption.RequestOption { return aoption.WithHeader("Idempotency-Key", k) }
	for _, row := range []struct {
		name, key   string
		generations int
		run         func(t *testing.T, key string)
	}{
		{"plain", "m-plain", 1, func(t *testing.T, key string) {
			var raw *http.Response
			m, err := w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 4417?"), keyed(key), aoption.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			g := w.fake.Generations()[0]
			if m.ID != g.ID || m.Content[0].Text != g.Content || raw.Header.Get("Idempotent-Replayed") != "" ||
				raw.Header.Get("Settle-Operation-Id") == "" || raw.Header.Get("Settle-Provider-Request-Id") != g.RequestID {
				t.Fatalf("client got %s %q %v; provider %+v", m.ID, m.Content[0].Text, raw.Header, g)
			}
			op := w.waitStatus(t, key, ops.StatusSucceeded) // the close follows the answer
			refs, err := w.db.AttemptRefs(ctx, op.ID)
			if op.Status != ops.StatusSucceeded || op.ProviderRef != g.ID || err != nil || refs[1] != g.ID {
				t.Fatalf("operation %s %s, attempt ids %v %v", op.Status, op.ProviderRef, refs, err)
			}
			// Priced at claude-sonnet-4-5's $3 in, $3.75 a token written to the cache, $15 out.
			var u struct {
				PromptTokens     int  `json:"prompt_tokens"`
				CacheWriteTokens int  `json:"cache_write_tokens"`
				CostKnown        bool `json:"cost_known"`
			}
			_ = json.Unmarshal(op.Usage, &u)
			want := int64(math.Round(float64(g.InputTokens)*3 + float64(g.CacheCreationInputTokens)*3.75 + float64(g.OutputTokens)*15))
			if g.CacheCreationInputTokens == 0 || !u.CostKnown || u.CacheWriteTokens != g.CacheCreationInputTokens ||
				u.PromptTokens != g.InputTokens+g.CacheCreationInputTokens || op.CostMicros != want {
				t.Fatalf("usage %s, cost %d, want %d", op.Usage, op.CostMicros, want)
			}
		}},
		{"stream", "m-stream", 1, func(t *testing.T, key string) {
			var raw *http.Response
			m, types, err := accumulate(t, w.sdk("shop").Messages.NewStreaming(ctx, claudeAsk("and order 4418?"), keyed(key), aoption.WithResponseInto(&raw)))
			gens := w.fake.Generations()
			g := gens[len(gens)-1]
			if err != nil || m.ID != g.ID || m.Content[0].Text != g.Content || m.StopReason != anthropic.StopReasonEndTurn ||
				types[0] != "message_start" || types[len(types)-1] != "message_stop" || raw.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("streamed %s %q %v (%v); provider %+v", m.ID, m.Content[0].Text, types, err, g)
			}
			op := w.waitStatus(t, key, ops.StatusSucceeded) // the close follows the stream's end
			if op.Status != ops.StatusSucceeded || op.ProviderRef != g.ID {
				t.Fatalf("operation %s %s", op.Status, op.ProviderRef)
			}
			// The stored message, replayed as JSON and as the events of a stream.
			again, err := w.sdk("shop").Messages.New(ctx, claudeAsk("and order 4418?"), keyed(key), aoption.WithResponseInto(&raw))
			if err != nil || again.ID != m.ID || again.Content[0].Text != m.Content[0].Text || again.Usage.OutputTokens != m.Usage.OutputTokens ||
				raw.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("JSON replay: %v %s %q", err, again.ID, again.Content[0].Text)
			}
			// The replayed stream is the stream Anthropic sent, event for event.
			m2, types2, err := accumulate(t, w.sdk("shop").Messages.NewStreaming(ctx, claudeAsk("and order 4418?"), keyed(key), aoption.WithResponseInto(&raw)))
			if err != nil || m2.ID != m.ID || m2.Content[0].Text != m.Content[0].Text || m2.StopReason != m.StopReason ||
				m2.Usage.CacheReadInputTokens != m.Usage.CacheReadInputTokens || raw.Header.Get("Idempotent-Replayed") != "true" ||
				strings.Join(types2, " ") != strings.Join(types, " ") {
				t.Fatalf("stream replay: %v %s %q %v", err, m2.ID, m2.Content[0].Text, types2)
			}
		}},
		{"the client's stream cut, then retried: the same message, event for event", "m-client-cut", 1, func(t *testing.T, key string) {
			ctx, cancel := context.WithCancel(ctx)
			st := w.sdk("shop").Messages.NewStreaming(ctx, claudeAsk("and order 4422?"), keyed(key))
			var seen []string
			for len(seen) < 3 && st.Next() {
				seen = append(seen, st.Current().Type)
			}
			cancel() // the client's network fails after three events
			st.Close()
			var raw *http.Response
			m, types, err := accumulate(t, w.sdk("shop").Messages.NewStreaming(context.Background(), claudeAsk("and order 4422?"), keyed(key), aoption.WithResponseInto(&raw)))
			g := w.fake.Generations()[len(w.fake.Generations())-1]
			if err != nil || len(seen) != 3 || m.ID != g.ID || m.Content[0].Text != g.Content || m.StopReason != anthropic.StopReasonEndTurn ||
				raw.Header.Get("Idempotent-Replayed") != "true" || strings.Join(types[:3], " ") != strings.Join(seen, " ") {
				t.Fatalf("retry: %v %s %q %v (first stream %v); Anthropic %+v", err, m.ID, m.Content[0].Text, types, seen, g)
			}
		}},
		{"same key twice: one generation, the second replayed", "m-twice", 1, func(t *testing.T, key string) {
			first, err := w.sdk("shop").Messages.New(ctx, claudeAsk("refund order 4419"), keyed(key))
			if err != nil {
				t.Fatal(err)
			}
			var raw *http.Response
			again, err := w.sdk("shop").Messages.New(ctx, claudeAsk("refund order 4419"), keyed(key), aoption.WithResponseInto(&raw))
			if err != nil {
				t.Fatalf("repeat: %v", err)
			}
			if again.ID != first.ID || again.Content[0].Text != first.Content[0].Text || again.Usage.OutputTokens != first.Usage.OutputTokens || again.Usage.CacheCreationInputTokens != first.Usage.CacheCreationInputTokens || raw.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("repeat: %s, replayed %q", again.ID, raw.Header.Get("Idempotent-Replayed"))
			}
		}},
		{"another body with the key: 422", "m-other", 1, func(t *testing.T, key string) {
			if _, err := w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 4420?"), keyed(key)); err != nil {
				t.Fatal(err)
			}
			// metadata.user_id changes neither the message nor its price: the same request.
			same := claudeAsk("where is order 4420?")
			same.Metadata = anthropic.MetadataParam{UserID: anthropic.String("customer-88")}
			var raw *http.Response
			if _, err := w.sdk("shop").Messages.New(ctx, same, keyed(key), aoption.WithResponseInto(&raw)); err != nil || raw.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("another end user: %v", err)
			}
			other := claudeAsk("where is order 4420?")
			other.StopSequences = []string{"END"}
			_, err := w.sdk("shop").Messages.New(ctx, other, keyed(key))
			wantAnthropicError(t, err, http.StatusUnprocessableEntity, "invalid_request_error", llm.ReasonKeyReused)
			// A beta changes what is generated, so it is another request too.
			_, err = w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 4420?"), keyed(key), aoption.WithHeader("anthropic-beta", "context-1m-2025-08-07"))
			wantAnthropicError(t, err, http.StatusUnprocessableEntity, "invalid_request_error", llm.ReasonKeyReused)
		}},
		{"Anthropic overloaded (529), then answered: nothing billed for the 529", "m-529", 1, func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultOverloaded, Times: 1})
			if _, err := w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 4421?"), keyed(key)); err != nil {
				t.Fatal(err)
			}
			op := w.op(t, key)
			if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND outcome = 'rate_limited' AND error_code = 'upstream_overloaded'`, op.ID); n != 1 || op.Attempts != 2 {
				t.Fatalf("%d attempts, %d of them the 529", op.Attempts, n)
			}
		}},
		{"stream cut, batch: the retry is told it cannot be completed", "m-cut-batch", 1, func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultDropStream, Chunk: 6, Times: 1})
			p := claudeAsk("summarise document 7")
			m, types, err := accumulate(t, w.sdk("pipeline").Messages.NewStreaming(ctx, p, keyed(key)))
			if err == nil || types[len(types)-1] == "message_stop" || m.StopReason != "" {
				t.Fatalf("the cut stream ended %v with %v, as a finished message %q", types, err, m.StopReason)
			}
			wantAnthropicErrorEvent(t, err, "api_error", llm.ReasonUpstreamError)
			g := w.fake.Generations()[len(w.fake.Generations())-1]
			op := w.op(t, key)
			refs, _ := w.db.AttemptRefs(ctx, op.ID)
			if op.Status != ops.StatusUnknown || refs[1] != g.ID {
				t.Fatalf("operation %s, attempt ids %v; Anthropic billed %s", op.Status, refs, g.ID)
			}
			// ops rules 11 and 12: nothing is sent again, nothing partial is passed off as
			// the message, and the answer says what can close it.
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, _, err = accumulate(t, w.sdk("pipeline").Messages.NewStreaming(ctx, p, keyed(key)))
				} else {
					_, err = w.sdk("pipeline").Messages.New(ctx, p, keyed(key))
				}
				msg := wantAnthropicError(t, err, http.StatusConflict, "conflict_error", llm.ReasonOutcomeUnknown)
				if !strings.Contains(msg, "neither fetched nor completed") || !strings.Contains(msg, "only a person settles it") {
					t.Fatalf("the retry is told %q", msg)
				}
			}
		}},
		{"stream cut, interactive: the retry resends, counted as a possible duplicate", "m-cut-shop", 2, func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultDropStream, Chunk: 6, Times: 1})
			before := w.gw.Stats().PossibleDuplicates
			p := claudeAsk("draft the reply to ticket 12")
			if _, types, err := accumulate(t, w.sdk("shop").Messages.NewStreaming(ctx, p, keyed(key))); err == nil || types[len(types)-1] == "message_stop" {
				t.Fatalf("the cut stream ended %v with %v", types, err)
			}
			m, err := w.sdk("shop").Messages.New(ctx, p, keyed(key))
			g := w.fake.Generations()[len(w.fake.Generations())-1]
			if err != nil || m.ID != g.ID || w.gw.Stats().PossibleDuplicates != before+1 {
				t.Fatalf("retry: %v %s (provider %s), possible duplicates %d", err, m.ID, g.ID, w.gw.Stats().PossibleDuplicates-before)
			}
		}},
		{"billed, then timed out, batch: the retry sends nothing", "m-timeout", 1, func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
			p := claudeAsk("classify document 8")
			_, err := w.sdk("pipeline").Messages.New(ctx, p, keyed(key))
			wantAnthropicError(t, err, http.StatusGatewayTimeout, "timeout_error", llm.ReasonTimeout)
			_, err = w.sdk("pipeline").Messages.New(ctx, p, keyed(key))
			msg := wantAnthropicError(t, err, http.StatusConflict, "conflict_error", llm.ReasonOutcomeUnknown)
			if !strings.Contains(msg, "Anthropic takes no idempotency key and has no lookup of a message") {
				t.Fatalf("the unknown outcome promises a lookup: %s", msg)
			}
			if op := w.op(t, key); op.Status != ops.StatusUnknown || op.Attempts != 1 {
				t.Fatalf("operation %s after %d attempts", op.Status, op.Attempts)
			}
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			before := len(w.fake.Generations())
			row.run(t, row.key)
			if n := len(w.fake.Generations()) - before; n != row.generations {
				t.Fatalf("Anthropic billed %d messages, want %d", n, row.generations)
			}
		})
	}
}

// wantAnthropicErrorEvent checks the error a stream ended with is Settle's error event in
// Anthropic's shape.
func wantAnthropicErrorEvent(t *testing.T, err error, typ, code string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || string(apiErr.Type()) != typ || !strings.Contains(apiErr.RawJSON(), `"error_code":"`+code+`"`) {
		t.Fatalf("the stream ended with %v, want an %s event with error_code %s", err, typ, code)
	}
}

// TestMessagesTakesTheTokenAsAPIKeyOrBearer: the tenant's Settle token is taken from x-api-key
// (as Anthropic's SDKs before 1.0 send it) or as a bearer token, on this route only; neither,
// two different ones, or a wrong one is refused in Anthropic's error shape, and only the
// gateway's own key reaches Anthropic.
func TestMessagesTakesTheTokenAsAPIKeyOrBearer(t *testing.T) {
	t.Parallel()
	w := newMessagesWorld(t, 0)
	body := `{"model":"claude-haiku-4-5","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`
	tok := w.tokens["shop"]
	for i, hdr := range [][]string{{"x-api-key", tok}, {"Authorization", "Bearer " + tok}, {"x-api-key", tok, "Authorization", "Bearer " + tok}} {
		resp, b := w.post(t, body, append(hdr, "Idempotency-Key", "auth-"+string(rune('a'+i)))...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, b)
		}
	}
	for _, hdr := range [][]string{nil, {"x-api-key", "stl_nope"}, {"x-api-key", tok, "Authorization", "Bearer " + w.tokens["pipeline"]}} {
		resp, b := w.post(t, body, append(hdr, "Idempotency-Key", "auth-x")...)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if _ = json.Unmarshal(b, &e); resp.StatusCode != http.StatusUnauthorized || e.Type != "error" || e.Error.Type != "authentication_error" {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, b)
		}
	}
	// The x-api-key route is this one only.
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("x-api-key", tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("chat completions with x-api-key: %v %v", resp, err)
	}
	gens := w.fake.Generations()
	if len(gens) != 3 || gens[0].APIKeyID != fake.AnthropicKeyID(upstreamKey) {
		t.Fatalf("Anthropic billed %+v", gens)
	}
}

// TestMessagesPassesVersionAndBeta: the client's anthropic-version and anthropic-beta reach
// Anthropic as sent (the betas in one order), anthropic-version 2023-06-01 when the client
// sent none; Settle's Idempotency-Key and token never do.
func TestMessagesPassesVersionAndBeta(t *testing.T) {
	t.Parallel()
	w := newMessagesWorld(t, 0)
	ctx := context.Background()
	_, err := w.sdk("shop", aoption.WithHeader("anthropic-version", "2023-06-01"),
		aoption.WithHeader("anthropic-beta", "token-efficient-tools-2025-02-19, extended-cache-ttl-2025-04-11")).
		Messages.New(ctx, claudeAsk("hello"), aoption.WithHeader("Idempotency-Key", "hdr-1"))
	if err != nil {
		t.Fatal(err)
	}
	resp, b := w.post(t, `{"model":"claude-haiku-4-5","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`,
		"x-api-key", w.tokens["shop"], "Idempotency-Key", "hdr-2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	gens, reqs := w.fake.Generations(), w.fake.Requests()
	if len(gens) != 2 || gens[0].AnthropicVersion != "2023-06-01" || gens[0].AnthropicBeta != "extended-cache-ttl-2025-04-11,token-efficient-tools-2025-02-19" ||
		gens[1].AnthropicVersion != llm.DefaultAnthropicVersion || gens[1].AnthropicBeta != "" {
		t.Fatalf("Anthropic saw %+v", gens)
	}
	for _, r := range reqs {
		if r.Header.Get("Idempotency-Key") != "" || gens[0].APIKeyID != fake.AnthropicKeyID(upstreamKey) {
			t.Fatalf("Anthropic was sent %v", r.Header)
		}
	}
	var stored struct {
		Headers map[string]string `json:"headers"`
	}
	if op := w.op(t, "hdr-1"); json.Unmarshal(op.Request, &stored) != nil || stored.Headers["anthropic-beta"] != gens[0].AnthropicBeta {
		t.Fatalf("the operation keeps %s", op.Request)
	}
}

// TestMessagesBadInputAndNoProvider: what Anthropic would refuse is refused before anything is
// recorded or sent, in Anthropic's error shape; a gateway without an Anthropic provider does
// not serve the route.
func TestMessagesBadInputAndNoProvider(t *testing.T) {
	t.Parallel()
	w := newMessagesWorld(t, 0)
	auth := []string{"x-api-key", w.tokens["shop"]}
	good := `{"model":"claude-haiku-4-5","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		body, key, code string
		status          int
	}{
		{good, "", llm.ReasonMissingKey, http.StatusBadRequest},
		{`{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`, "b1", llm.ReasonInvalidRequest, http.StatusBadRequest},
		{`{"model":"claude-haiku-4-5","max_tokens":0.5,"messages":[{"role":"user","content":"hi"}]}`, "b2", llm.ReasonInvalidRequest, http.StatusBadRequest},
		{`{"model":"claude-haiku-4-5","max_tokens":32,"messages":[]}`, "b3", llm.ReasonInvalidRequest, http.StatusBadRequest},
		{`{"model":"claude-haiku-4-5","max_tokens":32,"stream":"yes","messages":[{"role":"user","content":"hi"}]}`, "b4", llm.ReasonInvalidRequest, http.StatusBadRequest},
	} {
		hdr := auth
		if c.key != "" {
			hdr = append(hdr, "Idempotency-Key", c.key)
		}
		resp, b := w.post(t, c.body, hdr...)
		if resp.StatusCode != c.status || !strings.Contains(string(b), `"error_code":"`+c.code+`"`) || !strings.HasPrefix(string(b), `{"error":{`) {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
	if n := len(w.fake.Generations()); n != 0 || w.count(t, `SELECT count(*) FROM operations`) != 0 {
		t.Fatalf("%d billed", n)
	}

	// A gateway of OpenAI's APIs only.
	s, tw := newServer(t)
	_, base := tw.LLM(fake.LLMOptions{})
	gw, err := llm.New(llm.Config{Ledger: tw.Ledger(ops.NewManualClock(time.Now())), Upstream: tw.Upstream(base, openai.Config{Name: "fake-llm"})})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = gw
	url := tw.Serve(s.Handler())
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(good))
	req.Header.Set("x-api-key", tw.Token(tw.Tenant("shop"), "t"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "n1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"type":"not_found_error"`) {
		t.Fatalf("without Anthropic: %d %s", resp.StatusCode, b)
	}
}
