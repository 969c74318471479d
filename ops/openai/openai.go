// Package openai is the adapter of an OpenAI-compatible LLM provider over net/http: it
// sends the gateway's requests (chat completions and responses, JSON or an SSE stream, and
// embeddings, each to its own path) and the job workers' chat completions, and
// classifies each reply into an attempt outcome (Client, which implements llm.Upstream), it
// reads the provider's stored completions through the official openai-go SDK so a call whose
// answer was lost can be looked up (Client, an llm.StoredCompletions), and it reads the
// provider's usage report for the reconciler (UsageReader, a recon.UsageSource).
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/llm/upstream"
)

// Config configures the Client.
type Config struct {
	// Name is the provider's name as stored on operations; default "openai".
	Name string
	// BaseURL is the API root, such as https://api.openai.com/v1 (SETTLE_LLM_BASE_URL).
	BaseURL string
	// APIKey is sent as the bearer token (SETTLE_LLM_API_KEY).
	APIKey string
	// AttemptTimeout bounds one attempt from send to the end of the answer; default 10 min.
	AttemptTimeout time.Duration
	// IdleTimeout bounds the wait for the first byte and between two events of a stream;
	// default 60 s.
	IdleTimeout time.Duration
	// HTTPClient is the HTTP client; its own Timeout should be zero (the adapter sets
	// deadlines).
	HTTPClient *http.Client
	// Store says whether each attempt asks the provider to store its completion, tagged
	// with the operation's id, so it can be looked up (SETTLE_LLM_STORE); default auto.
	Store StoreMode
}

// Client sends chat completions to an OpenAI-compatible API with net/http. LLM providers
// take no idempotency key, so it sends none; it sends X-Client-Request-Id with the
// operation id and attempt number, which providers echo in their logs, so a billed request
// can be traced back to its operation.
type Client struct {
	cfg    Config
	sdk    sdk.Client
	sender upstream.Sender
	store  storeState
}

var _ llm.Upstream = (*Client)(nil)

// New returns the Client.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, ops.Errorf(ops.EINVALID, "The LLM base URL is not set (SETTLE_LLM_BASE_URL).")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, ops.Errorf(ops.EINVALID, "The LLM base URL %q must start with http:// or https://.", cfg.BaseURL)
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if !cfg.Store.Valid() {
		return nil, ops.Errorf(ops.EINVALID, "Unknown LLM store mode %q: use auto, on or off.", cfg.Store)
	}
	if cfg.Store == "" {
		cfg.Store = StoreAuto
	}
	cfg.AttemptTimeout, cfg.IdleTimeout, cfg.HTTPClient = upstream.Defaults(cfg.AttemptTimeout, cfg.IdleTimeout, cfg.HTTPClient)
	return &Client{cfg: cfg, sdk: newSDK(cfg), sender: newSender(cfg)}, nil
}

// newSender sends the attempts of the provider cfg names, by OpenAI's rules.
func newSender(cfg Config) upstream.Sender {
	return upstream.Sender{
		HTTPClient:       upstream.NoRedirects(cfg.HTTPClient),
		AttemptTimeout:   cfg.AttemptTimeout,
		IdleTimeout:      cfg.IdleTimeout,
		RequestIDHeaders: []string{"x-request-id", "request-id"},
		Busy:             busy,
		RetryAfter:       retryAfter,
		ErrorMessage:     errorMessage,
		Stream:           streamRules,
	}
}

// Name implements llm.Upstream.
func (o *Client) Name() string { return o.cfg.Name }

// Send implements llm.Upstream: one POST to the call's path (/chat/completions by default),
// or the call's GET (a background response read again), classified. The client's own keys among Settle's metadata never leave (untagged). When
// the provider stores completions, a chat completion's body asks it to, tagged with the
// operation (tagBody); a provider that refuses store in auto mode (a 400 about it, which
// billed nothing) is remembered and sent the body untagged. Other APIs are sent untagged:
// lookups read only stored chat completions.
func (o *Client) Send(ctx context.Context, c llm.Call) llm.Reply {
	plain, tagged := o.bodies(ctx, c)
	c.Body = plain
	if tagged == nil {
		return o.send(ctx, c)
	}
	c.Body = tagged
	r := o.send(ctx, c)
	if o.cfg.Store == StoreAuto && r.HTTPStatus == http.StatusBadRequest && mentionsStore(r.Message) {
		o.storeOff()
		c.Body = plain
		return o.send(ctx, c)
	}
	return r
}

// bodies returns the body of c's attempt without Settle's keys a client put in it (plain),
// and, where the provider stores completions and the call's API is looked up there, the
// body that asks it to store this one tagged with the operation (tagged; nil otherwise).
// A body that names no metadata holds none of Settle's keys: it is sent as it came, its
// fields left unread (tag.go).
func (o *Client) bodies(ctx context.Context, c llm.Call) (plain, tagged []byte) {
	var fields map[string]json.RawMessage
	read := !namesNoMetadata(c.Body)
	plain = c.Body
	if read {
		plain, fields = untagged(c.Body)
	}
	if (c.Path != "" && c.Path != llm.ChatPath) || o.StoreState(ctx) != llm.StoreOn {
		return plain, nil
	}
	if !read {
		if t, ok := appendTags(plain, c.OperationID, c.TenantID); ok {
			return plain, t
		}
		_, fields = untagged(plain)
	}
	if t, ok := tagBody(fields, c.OperationID, c.TenantID); ok {
		return plain, t
	}
	return plain, nil
}

func (o *Client) send(ctx context.Context, c llm.Call) llm.Reply {
	path, method := c.Path, c.Method
	if path == "" {
		path = llm.ChatPath
	}
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, o.cfg.BaseURL+path, bytes.NewReader(c.Body))
	if err != nil {
		return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_request", Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	if len(c.Body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if c.OperationID != "" {
		req.Header.Set("X-Client-Request-Id", fmt.Sprintf("%s.%d", c.OperationID, c.Attempt))
	}
	return o.sender.Send(ctx, req, c)
}

// streamRules are an OpenAI-compatible stream's: it ends with [DONE], and an event holding an
// error reports that the generation failed. The streams of APIs that send no [DONE] (the
// Responses API) end well when the call's events made a whole answer (llm.Call.Whole).
var streamRules = upstream.StreamRules{
	Done:   func(data []byte) bool { return bytes.Equal(data, []byte("[DONE]")) },
	Failed: hasError,
	FailedMessage: func([]byte) string {
		return "The provider reported an error in the middle of the stream."
	},
}

func hasError(data []byte) bool {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return false // most events: no need to decode them
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &e) == nil && len(e.Error) > 0 && !bytes.Equal(e.Error, []byte("null"))
}

// busy are the refusals at the door of an OpenAI-compatible provider, billed nothing and to be
// tried again after Retry-After: a 429 and a 503. LLM providers keep no key, so another 5xx
// leaves the outcome uncertain (the generation may have run and been billed).
var busy = map[int]string{
	http.StatusTooManyRequests:    "upstream_rate_limited",
	http.StatusServiceUnavailable: "upstream_unavailable",
}

// errorMessage is the message of an error answer.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Message
}

// retryAfter reads OpenAI's Retry-After-Ms, finer than the standard Retry-After it falls back
// to.
func retryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return upstream.Wait(ms, time.Millisecond)
	}
	return upstream.RetryAfter(h)
}
