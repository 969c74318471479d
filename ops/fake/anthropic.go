package fake

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fake Anthropic is a Messages API provider (POST /v1/messages) with the Admin API's
// messages usage report. Like the fake OpenAI it takes no idempotency key: every request
// that reaches generation is billed. It shares the fake OpenAI's fault rules and answer
// generator, and keeps its own ledger of generations, the requests it received (headers
// included, so a gateway's pass-through of anthropic-version and anthropic-beta can be
// checked) and its prompt cache.

// AnthropicOptions configures a fake Anthropic provider.
type AnthropicOptions struct {
	// Clock gives the time of generations, cache expiries and usage buckets; default
	// time.Now.
	Clock func() time.Time
	// Seed seeds the random source behind fault probabilities.
	Seed int64
	// Latency is how long every message waits before its first byte.
	Latency time.Duration
	// ChunkDelay is the pause between two deltas of a stream.
	ChunkDelay time.Duration
	// Words is the length of a reply unless max_tokens is smaller; default 24.
	Words int
	// Logger receives one line per request; default discards.
	Logger *slog.Logger
	// ReportLag is how long after it was billed a message shows in the usage report (a
	// store_lag fault or a rule's lag sets it per request), as Anthropic's report runs
	// behind.
	ReportLag time.Duration
	// AdminKey, when set, is the only key the Admin API accepts; otherwise any key that
	// starts with sk-ant-admin does. Admin keys never create messages.
	AdminKey string
}

// AnthropicGeneration is one billed message as the fake Anthropic's ledger records it.
type AnthropicGeneration struct {
	// ID is the message id (msg_...).
	ID string `json:"id"`
	// RequestID is the request-id header the answer carried (req_...).
	RequestID string `json:"request_id"`
	// APIKeyID identifies the API key that paid (see AnthropicKeyID).
	APIKeyID string `json:"api_key_id"`
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	// InputTokens are the prompt tokens read from no cache; the cache's tokens are apart.
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	// CacheCreation1hInputTokens is the part of the cache written for an hour.
	CacheCreation1hInputTokens int       `json:"cache_creation_1h_input_tokens"`
	CacheReadInputTokens       int       `json:"cache_read_input_tokens"`
	OutputTokens               int       `json:"output_tokens"`
	StopReason                 string    `json:"stop_reason"`
	Created                    time.Time `json:"created"`
	// Fault names the fault that hit the answer of this generation, if any.
	Fault string `json:"fault,omitempty"`
	// Content is the generated text, or the arguments of a forced tool call.
	Content string `json:"content"`
	// AnthropicVersion and AnthropicBeta are the headers the request carried.
	AnthropicVersion string `json:"anthropic_version"`
	AnthropicBeta    string `json:"anthropic_beta,omitempty"`
	// reported is when the generation shows in the usage report.
	reported time.Time
}

// AnthropicRequest is one API request the fake Anthropic received, with its headers as
// they came, the credentials removed.
type AnthropicRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
}

// Anthropic is a fake Anthropic provider. All of its state lives in the struct.
type Anthropic struct {
	clock      func() time.Time
	latency    atomic.Int64
	chunkDelay atomic.Int64
	words      int
	log        *slog.Logger
	reportLag  time.Duration
	adminKey   string
	handler    http.Handler
	srv        *loopServer
	faults     *ruleSet[LLMFault]

	mu          sync.Mutex
	generations []AnthropicGeneration
	requests    []AnthropicRequest
	// cache holds when each cached prompt prefix expires, by key, model and prefix.
	cache map[string]time.Time
}

// NewAnthropic returns a fake Anthropic provider with no faults.
func NewAnthropic(opts AnthropicOptions) *Anthropic {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Words <= 0 {
		opts.Words = 24
	}
	a := &Anthropic{clock: opts.Clock, words: opts.Words, log: opts.Logger, reportLag: opts.ReportLag,
		adminKey: opts.AdminKey, srv: newLoopServer("fake anthropic", opts.Logger), cache: map[string]time.Time{},
		faults: newRuleSet[LLMFault](rand.New(rand.NewPCG(uint64(opts.Seed), uint64(opts.Seed)^0xa7c)))}
	a.latency.Store(int64(opts.Latency))
	a.chunkDelay.Store(int64(opts.ChunkDelay))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", a.messages)
	mux.HandleFunc("GET /v1/organizations/usage_report/messages", a.usageReport)
	mux.HandleFunc("GET /_fake/anthropic/generations", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.Generations())
	})
	mux.HandleFunc("GET /_fake/anthropic/requests", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.Requests())
	})
	mux.HandleFunc("GET /_fake/anthropic/faults", func(w http.ResponseWriter, _ *http.Request) { writeFaults(w, a.Faults()) })
	mux.HandleFunc("POST /_fake/anthropic/faults", a.adminAddFaults)
	mux.HandleFunc("DELETE /_fake/anthropic/faults", func(w http.ResponseWriter, _ *http.Request) {
		a.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		anthropicError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("Not found: %s %s", r.Method, r.URL.Path))
	})
	a.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/_fake/") {
			a.record(r)
		}
		mux.ServeHTTP(w, r)
	})
	return a
}

// Handler returns the HTTP handler: the Anthropic API under /v1 and the admin routes under
// /_fake/anthropic.
func (a *Anthropic) Handler() http.Handler { return a.handler }

// Start listens on addr (loopback only; "" means 127.0.0.1 on a free port) and serves in
// the background. It returns the base URL to give an Anthropic client: http://host:port.
func (a *Anthropic) Start(addr string) (string, error) {
	hostport, err := a.srv.start(addr, a.handler)
	if err != nil {
		return "", err
	}
	return "http://" + hostport, nil
}

// Close stops the server and wakes requests held by a fault. Safe to call more than once.
func (a *Anthropic) Close() error { return a.srv.close() }

// SetPace changes the wait before every message's first byte and between two deltas.
func (a *Anthropic) SetPace(latency, chunkDelay time.Duration) {
	a.latency.Store(int64(latency))
	a.chunkDelay.Store(int64(chunkDelay))
}

// Generations returns every billed message, in the order they were billed.
func (a *Anthropic) Generations() []AnthropicGeneration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AnthropicGeneration(nil), a.generations...)
}

// Requests returns every API request received, in order, billed or not.
func (a *Anthropic) Requests() []AnthropicRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AnthropicRequest(nil), a.requests...)
}

func (a *Anthropic) record(r *http.Request) {
	h := r.Header.Clone()
	h.Del("X-Api-Key")
	h.Del("Authorization")
	a.mu.Lock()
	a.requests = append(a.requests, AnthropicRequest{Method: r.Method, Path: r.URL.Path, Header: h})
	a.mu.Unlock()
}

// AddFault appends a fault rule; see LLM.AddFault. Its path is matched against
// /v1/messages.
func (a *Anthropic) AddFault(f LLMFault) { a.faults.add(f) }

// ClearFaults removes every fault rule.
func (a *Anthropic) ClearFaults() { a.faults.clear() }

// Faults returns the current rules.
func (a *Anthropic) Faults() []LLMFault { return a.faults.list() }

func (a *Anthropic) pickFault(path string) *LLMFault {
	return a.faults.pick(func(f LLMFault) bool { return f.matches(path) }, LLMFault.timing)
}

// adminAddFaults appends rules given as a JSON array of LLMFault, or, with Content-Type
// text/plain, as a ParseLLMFaults spec.
func (a *Anthropic) adminAddFaults(w http.ResponseWriter, r *http.Request) {
	addFaults(w, r, ParseLLMFaults, a.AddFault, a.Faults)
}

// AnthropicKeyID is the api_key_id the fake Anthropic reports for an API key in its ledger
// and usage report.
func AnthropicKeyID(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return "apikey_" + hex.EncodeToString(sum[:12])
}

// anthropicKey returns the key a request authenticates with: x-api-key, or a bearer token.
func anthropicKey(r *http.Request) (string, bool) {
	if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" {
		return k, true
	}
	return bearer(r)
}

func (a *Anthropic) isAdminKey(key string) bool {
	if a.adminKey != "" {
		return key == a.adminKey
	}
	return strings.HasPrefix(key, "sk-ant-admin")
}

// anthropicError answers in Anthropic's error shape, naming the request id the answer
// carries.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, obj{"type": "error", "error": obj{"type": typ, "message": msg},
		"request_id": nullable(w.Header().Get("request-id"))})
}
