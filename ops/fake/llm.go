package fake

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The fake LLM is an OpenAI-compatible chat completions provider. Like real LLM providers it
// takes no idempotency key: every request that reaches generation is billed, however often
// the same body arrives. Its ledger of generations and its usage report are the provider's
// side of the story that reconciliation and tests compare Settle's ledger with.

// LLMOptions configures a fake LLM provider.
type LLMOptions struct {
	// Clock gives the time of generations and usage buckets; default time.Now.
	Clock func() time.Time
	// Seed seeds the random source behind fault probabilities.
	Seed int64
	// Latency is how long every completion waits before its first byte.
	Latency time.Duration
	// ChunkDelay is the pause between two chunks of a stream.
	ChunkDelay time.Duration
	// Words is the length of a reply when the request sets no max tokens; default 24.
	Words int
	// Logger receives one line per request; default discards.
	Logger *slog.Logger
}

// Generation is one billed completion as the fake's ledger records it.
type Generation struct {
	// ID is the completion id (chatcmpl-...).
	ID string `json:"id"`
	// RequestID is the x-request-id header the answer carried (req_...).
	RequestID string `json:"request_id"`
	// APIKeyID identifies the API key that paid (see LLMKeyID); the key itself is not kept.
	APIKeyID string `json:"api_key_id"`
	// ClientRequestID is the X-Client-Request-Id header the caller sent, if any.
	ClientRequestID  string    `json:"client_request_id,omitempty"`
	Model            string    `json:"model"`
	Stream           bool      `json:"stream"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	CachedTokens     int       `json:"cached_tokens"`
	Created          time.Time `json:"created"`
	// Fault names the fault that hit the answer of this generation, if any.
	Fault string `json:"fault,omitempty"`
	// Content is the generated text of the first choice.
	Content string `json:"content"`
}

// LLM is a fake OpenAI-compatible provider. All of its state lives in the struct.
type LLM struct {
	clock      func() time.Time
	latency    time.Duration
	chunkDelay time.Duration
	words      int
	log        *slog.Logger
	handler    http.Handler

	done      chan struct{}
	closeOnce sync.Once
	srvMu     sync.Mutex
	srv       *http.Server
	closed    bool

	mu          sync.Mutex
	generations []Generation
	prompts     map[string]bool // prompt hashes seen, per key: the second time they are cached

	faults *ruleSet[LLMFault]
}

// NewLLM returns a fake LLM provider with no faults.
func NewLLM(opts LLMOptions) *LLM {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Words <= 0 {
		opts.Words = 24
	}
	l := &LLM{
		clock: opts.Clock, latency: opts.Latency, chunkDelay: opts.ChunkDelay, words: opts.Words, log: opts.Logger,
		done:    make(chan struct{}),
		prompts: map[string]bool{},
		faults:  newRuleSet[LLMFault](rand.New(rand.NewPCG(uint64(opts.Seed), uint64(opts.Seed)^0x11a))),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", l.chatCompletions)
	mux.HandleFunc("GET /v1/usage", l.usage)
	mux.HandleFunc("GET /v1/organization/usage/completions", l.usage)
	mux.HandleFunc("GET /_fake/llm/generations", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, l.Generations())
	})
	mux.HandleFunc("GET /_fake/llm/faults", l.adminListFaults)
	mux.HandleFunc("POST /_fake/llm/faults", l.adminAddFaults)
	mux.HandleFunc("DELETE /_fake/llm/faults", func(w http.ResponseWriter, _ *http.Request) {
		l.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path))
	})
	l.handler = mux
	return l
}

// Handler returns the HTTP handler: the OpenAI-compatible API under /v1 and the admin
// routes under /_fake/llm.
func (l *LLM) Handler() http.Handler { return l.handler }

// Start listens on addr (loopback only; "" means 127.0.0.1 on a free port) and serves in
// the background. It returns the base URL to give an OpenAI client: http://host:port/v1.
func (l *LLM) Start(addr string) (string, error) {
	addr, err := loopbackAddr(addr)
	if err != nil {
		return "", fmt.Errorf("fake llm: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fake llm: listen: %w", err)
	}
	srv := &http.Server{Handler: l.handler, ReadHeaderTimeout: 10 * time.Second}
	l.srvMu.Lock()
	if l.srv != nil || l.closed {
		l.srvMu.Unlock()
		ln.Close()
		return "", errors.New("fake llm: already started or closed")
	}
	l.srv = srv
	l.srvMu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("fake llm: serve", "err", err)
		}
	}()
	return "http://" + ln.Addr().String() + "/v1", nil
}

// Close stops the server and wakes requests held by a fault. Safe to call more than once.
func (l *LLM) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		l.srvMu.Lock()
		srv := l.srv
		l.closed = true
		l.srvMu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if e := srv.Shutdown(ctx); e != nil {
				err = errors.Join(fmt.Errorf("fake llm: shutdown: %w", e), srv.Close())
			}
			cancel()
		}
	})
	return err
}

// Generations returns every billed generation, in the order they were billed.
func (l *LLM) Generations() []Generation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Generation(nil), l.generations...)
}

// LLMKeyID is the api_key_id the fake reports for an API key in its ledger and usage.
func LLMKeyID(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return "key_" + hex.EncodeToString(sum[:8])
}

// chatRequest is the part of a chat completion request the fake reads.
type chatRequest struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	N                   *int `json:"n"`
	Tools               []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// choice is one generated answer.
type choice struct {
	content  string
	tokens   []string
	toolName string
	toolArgs string
	toolID   string
}

func (l *LLM) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newID("req_")
	h := w.Header()
	h.Set("x-request-id", reqID)
	outcome := "generated"
	var fault *LLMFault
	defer func() {
		attrs := []any{"request_id", reqID, "outcome", outcome, "dur", time.Since(start)}
		if fault != nil {
			attrs = append(attrs, "fault", string(fault.Kind))
		}
		l.log.Info("fake llm request", attrs...)
	}()
	key, ok := bearer(r)
	if !ok {
		outcome = "unauthorized"
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer ...'.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		outcome = "unreadable"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not read the request body.")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		outcome = "bad_json"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	switch {
	case req.Model == "":
		outcome = "invalid"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return
	case len(req.Messages) == 0:
		outcome = "invalid"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "[] is too short - 'messages'")
		return
	}

	fault = l.pickFault(r.URL.Path)
	if !l.sleep(r.Context(), l.latency) {
		outcome = "gone"
		return
	}
	if fault != nil {
		switch fault.Kind {
		case LLMFaultRateLimit:
			outcome = "fault"
			retry := fault.RetryAfter
			if retry <= 0 {
				retry = 1
			}
			h.Set("Retry-After", strconv.Itoa(retry))
			openAIError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later.")
			return
		case LLMFaultServerError:
			outcome = "fault"
			openAIError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request. Sorry about that!")
			return
		case LLMFaultGarbage:
			outcome = "fault"
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
			return
		case LLMFaultSlow:
			if !l.sleep(r.Context(), fault.Delay) {
				outcome = "gone"
				return
			}
		}
	}

	// Generation: from here on the request is billed.
	now := l.clock()
	seed := contentSeed(body)
	n := 1
	if req.N != nil && *req.N > 1 {
		n = min(*req.N, 8)
	}
	words := l.words
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens > 0 {
		words = min(*req.MaxCompletionTokens, 4096)
	} else if req.MaxTokens != nil && *req.MaxTokens > 0 {
		words = min(*req.MaxTokens, 4096)
	}
	tool := forcedTool(req)
	choices := make([]choice, n)
	completionTokens := 0
	for i := range choices {
		choices[i] = generate(seed+uint64(i)*0x9e3779b97f4a7c15, words, tool)
		completionTokens += len(choices[i].tokens)
	}
	promptTokens := countPromptTokens(req.Messages)
	g := Generation{
		ID: newID("chatcmpl-"), RequestID: reqID, APIKeyID: LLMKeyID(key), ClientRequestID: r.Header.Get("X-Client-Request-Id"),
		Model: req.Model, Stream: req.Stream, PromptTokens: promptTokens, CompletionTokens: completionTokens,
		Created: now, Content: choices[0].content,
	}
	if fault != nil {
		g.Fault = string(fault.Kind)
	}
	promptHash := g.APIKeyID + "/" + hashMessages(req.Model, req.Messages)
	l.mu.Lock()
	if l.prompts[promptHash] {
		g.CachedTokens = promptTokens &^ 15
	}
	l.prompts[promptHash] = true
	l.generations = append(l.generations, g)
	l.mu.Unlock()
	h.Set("openai-processing-ms", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	h.Set("openai-model", req.Model)

	if fault != nil && fault.Kind == LLMFaultBillThenTimeout {
		// Billed; the answer comes only after the client has given up.
		outcome = "fault"
		d := fault.Delay
		if d <= 0 {
			d = 90 * time.Second
		}
		if !l.sleep(r.Context(), d) {
			dropConnection(w)
			return
		}
	}
	usage := usageObject(g)
	if !req.Stream {
		if fault != nil && fault.Kind == LLMFaultDropStream {
			outcome = "fault"
			dropConnection(w)
			return
		}
		msgs := make([]obj, n)
		for i, c := range choices {
			msgs[i] = obj{"index": i, "message": messageObject(c), "logprobs": nil, "finish_reason": finishReason(c)}
		}
		writeJSON(w, http.StatusOK, obj{
			"id": g.ID, "object": "chat.completion", "created": now.Unix(), "model": req.Model,
			"system_fingerprint": "fp_settle_fake", "service_tier": "default", "choices": msgs, "usage": usage,
		})
		return
	}
	l.stream(w, r, g, req, choices, usage, fault, &outcome)
}

// stream writes the completion as server-sent events, one token per chunk.
func (l *LLM) stream(w http.ResponseWriter, r *http.Request, g Generation, req chatRequest, choices []choice, usage obj, fault *LLMFault, outcome *string) {
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sent := 0
	dropAt := -1
	if fault != nil && fault.Kind == LLMFaultDropStream {
		dropAt = max(fault.Chunk, 0)
	}
	emit := func(chunkChoices []obj, u any) bool {
		if sent == dropAt {
			*outcome = "fault"
			dropConnection(w)
			return false
		}
		c := obj{"id": g.ID, "object": "chat.completion.chunk", "created": g.Created.Unix(), "model": g.Model,
			"system_fingerprint": "fp_settle_fake", "choices": chunkChoices}
		if includeUsage {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			*outcome = "client_gone"
			return false
		}
		_ = rc.Flush()
		sent++
		return true
	}
	pause := func() bool {
		if l.chunkDelay > 0 && !l.sleep(r.Context(), l.chunkDelay) {
			*outcome = "client_gone"
			return false
		}
		return true
	}
	for i, c := range choices {
		first := obj{"role": "assistant", "content": ""}
		if c.toolName != "" {
			first = obj{"role": "assistant", "content": nil, "tool_calls": []obj{{"index": 0, "id": c.toolID, "type": "function",
				"function": obj{"name": c.toolName, "arguments": ""}}}}
		}
		if !emit([]obj{{"index": i, "delta": first, "logprobs": nil, "finish_reason": nil}}, nil) {
			return
		}
		for _, tok := range c.tokens {
			if !pause() {
				return
			}
			delta := obj{"content": tok}
			if c.toolName != "" {
				delta = obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": tok}}}}
			}
			if !emit([]obj{{"index": i, "delta": delta, "logprobs": nil, "finish_reason": nil}}, nil) {
				return
			}
		}
		if !emit([]obj{{"index": i, "delta": obj{}, "logprobs": nil, "finish_reason": finishReason(c)}}, nil) {
			return
		}
	}
	if includeUsage && !emit([]obj{}, usage) {
		return
	}
	if sent == dropAt {
		*outcome = "fault"
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func messageObject(c choice) obj {
	if c.toolName != "" {
		return obj{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []obj{{"id": c.toolID, "type": "function",
			"function": obj{"name": c.toolName, "arguments": c.toolArgs}}}}
	}
	return obj{"role": "assistant", "content": c.content, "refusal": nil}
}

func finishReason(c choice) string {
	if c.toolName != "" {
		return "tool_calls"
	}
	return "stop"
}

func usageObject(g Generation) obj {
	return obj{"prompt_tokens": g.PromptTokens, "completion_tokens": g.CompletionTokens,
		"total_tokens":              g.PromptTokens + g.CompletionTokens,
		"prompt_tokens_details":     obj{"cached_tokens": g.CachedTokens, "audio_tokens": 0},
		"completion_tokens_details": obj{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
}

// forcedTool returns the function the request forces a call of: the named one, or the
// first tool when tool_choice is "required". "" means the model answers in text.
func forcedTool(req chatRequest) string {
	if len(req.Tools) == 0 || len(req.ToolChoice) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(req.ToolChoice, &s) == nil {
		if s == "required" {
			return req.Tools[0].Function.Name
		}
		return ""
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &named) == nil {
		return named.Function.Name
	}
	return ""
}

// vocabulary is what the fake says: plain words, one token each.
var vocabulary = strings.Fields(`the order was refunded and your request is being checked by our team today we
will send an update once the payment provider confirms it please keep this message for your records thank you for
waiting summary customer asked about delivery status agent explained next steps ticket closed`)

// generate makes a deterministic answer of n tokens from seed.
func generate(seed uint64, n int, tool string) choice {
	r := rand.New(rand.NewPCG(seed, seed^0xfa4e))
	var c choice
	if tool != "" {
		c.toolName, c.toolID = tool, fmt.Sprintf("call_%016x", r.Uint64())
		args := fmt.Sprintf(`{"note":"%s"}`, vocabulary[r.IntN(len(vocabulary))])
		// Arguments arrive in three pieces, as real streams split them.
		third := len(args) / 3
		c.tokens = []string{args[:third], args[third : 2*third], args[2*third:]}
		c.toolArgs = args
		return c
	}
	c.tokens = make([]string, n)
	var b strings.Builder
	for i := range n {
		w := vocabulary[r.IntN(len(vocabulary))]
		if i > 0 {
			w = " " + w
		} else {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		if i == n-1 {
			w += "."
		}
		c.tokens[i] = w
		b.WriteString(w)
	}
	c.content = b.String()
	return c
}

// contentSeed hashes the request without its transport fields, so the same question gets
// the same answer streamed or not.
func contentSeed(body []byte) uint64 {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	delete(m, "stream")
	delete(m, "stream_options")
	delete(m, "user")
	b, _ := json.Marshal(m) // sorted keys
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func hashMessages(model string, msgs []json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(model))
	for _, m := range msgs {
		h.Write(m)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// countPromptTokens counts words of message contents plus a few tokens per message, the
// way providers add framing tokens.
func countPromptTokens(msgs []json.RawMessage) int {
	n := 3
	for _, raw := range msgs {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &m)
		n += 4
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n += len(strings.Fields(s))
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				n += len(strings.Fields(p.Text))
			}
		}
	}
	return n
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// openAIError answers in OpenAI's error shape.
func openAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, obj{"error": obj{"message": msg, "type": typ, "param": nil, "code": nullable(code)}})
}

// sleep waits d and reports whether it ran to the end; Close or ctx cut it short.
func (l *LLM) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// usage answers GET /v1/usage (and the OpenAI path /v1/organization/usage/completions):
// billed requests per time bucket, grouped by API key and model. Parameters: bucket (or
// bucket_width) 1m, 1h or 1d; start and end (or start_time, end_time) in Unix seconds; an
// optional api_key_id to see one key. Every bucket from start to end is listed, empty or
// not.
func (l *LLM) usage(w http.ResponseWriter, r *http.Request) {
	if _, ok := bearer(r); !ok {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return
	}
	q := r.URL.Query()
	width := map[string]time.Duration{"1m": time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}[firstOf(q.Get("bucket"), q.Get("bucket_width"), "1d")]
	if width == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "bucket must be 1m, 1h or 1d.")
		return
	}
	gens := l.Generations()
	now := l.clock()
	start, err1 := unixParam(firstOf(q.Get("start"), q.Get("start_time")), time.Time{})
	end, err2 := unixParam(firstOf(q.Get("end"), q.Get("end_time")), now.Add(width))
	if err := errors.Join(err1, err2); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	if start.IsZero() {
		start = now
		for _, g := range gens {
			if g.Created.Before(start) {
				start = g.Created
			}
		}
	}
	start = start.Truncate(width)
	if !end.After(start) {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "end must be after start.")
		return
	}
	if end.Sub(start)/width > 1440 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "At most 1440 buckets per page.")
		return
	}
	keyFilter := q.Get("api_key_id")
	type group struct{ key, model string }
	type totals struct{ in, out, cached, n int }
	var data []obj
	for b := start; b.Before(end); b = b.Add(width) {
		sums := map[group]*totals{}
		for _, g := range gens {
			if g.Created.Before(b) || !g.Created.Before(b.Add(width)) || (keyFilter != "" && g.APIKeyID != keyFilter) {
				continue
			}
			k := group{g.APIKeyID, g.Model}
			if sums[k] == nil {
				sums[k] = &totals{}
			}
			t := sums[k]
			t.in, t.out, t.cached, t.n = t.in+g.PromptTokens, t.out+g.CompletionTokens, t.cached+g.CachedTokens, t.n+1
		}
		keys := make([]group, 0, len(sums))
		for k := range sums {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].key < keys[j].key || keys[i].key == keys[j].key && keys[i].model < keys[j].model
		})
		results := make([]obj, 0, len(keys))
		for _, k := range keys {
			t := sums[k]
			results = append(results, obj{"object": "organization.usage.completions.result", "input_tokens": t.in,
				"output_tokens": t.out, "input_cached_tokens": t.cached, "num_model_requests": t.n,
				"api_key_id": k.key, "model": k.model, "project_id": nil, "user_id": nil, "batch": nil})
		}
		data = append(data, obj{"object": "bucket", "start_time": b.Unix(), "end_time": b.Add(width).Unix(), "results": results})
	}
	if data == nil {
		data = []obj{}
	}
	writeJSON(w, http.StatusOK, obj{"object": "page", "data": data, "has_more": false, "next_page": nil})
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func unixParam(v string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a Unix time in seconds", v)
	}
	return time.Unix(n, 0).UTC(), nil
}
