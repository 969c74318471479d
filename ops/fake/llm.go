package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// StoreRetention is how long a completion created with store: true stays listed and
	// retrievable; default 30 days, as OpenAI keeps them.
	StoreRetention time.Duration
	// StoreLag is how long after its creation a stored completion becomes visible to list
	// and retrieve (a store_lag fault or a rule's lag sets it per request).
	StoreLag time.Duration
	// NoStore makes the fake a provider without stored completions: a request carrying
	// store or metadata is refused with 400 before anything is billed, and the list and
	// retrieve routes answer 404.
	NoStore bool
	// RefuseStoreWrites makes the fake an organisation with zero data retention: stored
	// completions can be listed (none are ever stored), but a request asking to store one
	// is refused with 400 before anything is billed.
	RefuseStoreWrites bool
}

// Generation is one billed completion as the fake's ledger records it.
type Generation struct {
	// ID is the completion id (chatcmpl-...), the response id (resp_...) or, for
	// embeddings, which have no id, the request id.
	ID string `json:"id"`
	// API is the route that billed it: chat.completions, responses or embeddings.
	API LLMAPI `json:"api"`
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
	// Stored says the request asked the provider to store the completion (store: true);
	// Metadata is what it tagged it with.
	Stored   bool              `json:"stored,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// MaxOutputTokens is the output cap the request named (a chat completion's
	// max_completion_tokens, else its max_tokens; a response's max_output_tokens), 0 when it
	// named none: what a test of a gateway that sets the cap reads the provider got.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
}

// LLM is a fake OpenAI-compatible provider. All of its state lives in the struct.
type LLM struct {
	clock func() time.Time
	// latency and chunkDelay are nanoseconds, atomic so SetPace may change them while
	// requests are served.
	latency    atomic.Int64
	chunkDelay atomic.Int64
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

	store storeOptions
	// stored holds the completions created with store: true, oldest first (under mu).
	stored []*storedCompletion
	// runs holds the stored responses of the Responses API by id (under mu).
	runs map[string]*responseRun
	// cancels holds the response id of every cancel asked for, in order (under mu).
	cancels []string
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
		clock: opts.Clock, words: opts.Words, log: opts.Logger,
		done:    make(chan struct{}),
		prompts: map[string]bool{},
		faults:  newRuleSet[LLMFault](rand.New(rand.NewPCG(uint64(opts.Seed), uint64(opts.Seed)^0x11a))),
		store:   newStoreOptions(opts),
		runs:    map[string]*responseRun{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", l.chatCompletions)
	mux.HandleFunc("GET /v1/chat/completions", l.listStored)
	mux.HandleFunc("GET /v1/chat/completions/{id}", l.getStored)
	mux.HandleFunc("GET /v1/usage", l.usage)
	mux.HandleFunc("GET /v1/organization/usage/completions", l.usage)
	mux.HandleFunc("POST /v1/responses", l.createResponse)
	mux.HandleFunc("GET /v1/responses/{id}", l.getResponse)
	mux.HandleFunc("POST /v1/responses/{id}/cancel", l.cancelResponse)
	mux.HandleFunc("POST /v1/embeddings", l.embeddings)
	mux.HandleFunc("GET /v1/organization/usage/embeddings", l.usage)
	mux.HandleFunc("GET /_fake/llm/generations", l.adminGenerations)
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
	l.SetPace(opts.Latency, opts.ChunkDelay)
	return l
}

// SetPace changes the wait before every completion's first byte and between two chunks of
// a stream: a history written at full speed, then live traffic at a human pace.
func (l *LLM) SetPace(latency, chunkDelay time.Duration) {
	l.latency.Store(int64(latency))
	l.chunkDelay.Store(int64(chunkDelay))
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
	Store      *bool           `json:"store"`
	Metadata   json.RawMessage `json:"metadata"`
}

// chatCompletions answers POST /v1/chat/completions as OpenAI does, with the faults set on
// the fake striking before, during or after generation.
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
	key, body, req, refused := readChatRequest(w, r)
	if refused == "" {
		refused = l.checkStore(w, req)
	}
	if refused != "" {
		outcome = refused
		return
	}

	fault = l.pickFault(r.URL.Path)
	if !l.sleep(r.Context(), time.Duration(l.latency.Load())) {
		outcome = "gone"
		return
	}
	if fault != nil {
		if o := l.failBeforeGenerating(w, r, fault); o != "" {
			outcome = o
			return
		}
	}

	// Generation: from here on the request is billed.
	g, choices := l.generateChat(r, req, body, reqID, key, fault)
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
		writeCompletion(w, g, choices, usage)
		return
	}
	l.stream(w, r, g, req, choices, usage, fault, &outcome)
}

// readChatRequest reads and checks a chat completion request the way OpenAI refuses bad
// ones: before anything is billed. On a refusal it has answered, and it returns the outcome
// to log; "" means the request goes on.
func readChatRequest(w http.ResponseWriter, r *http.Request) (key string, body []byte, req chatRequest, refused string) {
	key, ok := bearer(r)
	if !ok {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer ...'.")
		return key, nil, req, "unauthorized"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not read the request body.")
		return key, body, req, "unreadable"
	}
	if err := json.Unmarshal(body, &req); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return key, body, req, "bad_json"
	}
	switch {
	case req.Model == "":
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return key, body, req, "invalid"
	case len(req.Messages) == 0:
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "[] is too short - 'messages'")
		return key, body, req, "invalid"
	}
	return key, body, req, ""
}

// failBeforeGenerating plays the faults that strike before generation, so nothing is
// billed: it answers and returns the outcome to log, or returns "" for the request to go on
// (after the delay of a slow fault).
func (l *LLM) failBeforeGenerating(w http.ResponseWriter, r *http.Request, fault *LLMFault) string {
	h := w.Header()
	switch fault.Kind {
	case LLMFaultRateLimit:
		retry := fault.RetryAfter
		if retry <= 0 {
			retry = 1
		}
		h.Set("Retry-After", strconv.Itoa(retry))
		openAIError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later.")
		return "fault"
	case LLMFaultServerError:
		openAIError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request. Sorry about that!")
		return "fault"
	case LLMFaultOverloaded:
		openAIError(w, http.StatusServiceUnavailable, "server_error", "", "The engine is currently overloaded, please try again later.")
		return "fault"
	case LLMFaultGarbage:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		return "fault"
	case LLMFaultSlow:
		if !l.sleep(r.Context(), fault.Delay) {
			return "gone"
		}
	}
	return ""
}

// generateChat generates the request's choices and records the billed generation in the
// fake's ledger; a prompt the same key sent before counts as cached.
func (l *LLM) generateChat(r *http.Request, req chatRequest, body []byte, reqID, key string, fault *LLMFault) (Generation, []choice) {
	now := l.clock()
	seed := contentSeed(body)
	n := 1
	if req.N != nil && *req.N > 1 {
		n = min(*req.N, 8)
	}
	words, named := l.words, 0
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens > 0 {
		named = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil && *req.MaxTokens > 0 {
		named = *req.MaxTokens
	}
	if named > 0 {
		words = min(named, 4096)
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
		API: APIChatCompletions, Model: req.Model, Stream: req.Stream, PromptTokens: promptTokens, CompletionTokens: completionTokens,
		Created: now, Content: choices[0].content, MaxOutputTokens: named,
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
	if req.Store != nil && *req.Store {
		g.Stored, g.Metadata = true, readMetadata(req.Metadata)
		l.keep(g, choices, fault)
	}
	l.generations = append(l.generations, g)
	l.mu.Unlock()
	return g, choices
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
	return sleepUnless(ctx, l.done, d)
}
