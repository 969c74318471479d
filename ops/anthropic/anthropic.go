// Package anthropic is the adapter of Anthropic's Messages API over net/http: it sends the
// gateway's messages (JSON or a stream of server-sent events) and classifies each reply into
// an attempt outcome (Client, which implements llm.Upstream).
//
// Anthropic takes no idempotency key and keeps no message that could be read again, so the
// adapter offers no lookup: a call whose outcome is unknown is settled by a person. What it
// reads for the reconciler is Anthropic's Messages usage report (UsageReader), which counts
// the tokens billed per minute, model and key: the reconciler sets them beside the prompts
// of Settle's calls and reports a minute that billed a call twice, and closes nothing from
// it.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/llm/upstream"
)

// Config configures the Client.
type Config struct {
	// Name is the provider's name as stored on operations; default "anthropic".
	Name string
	// BaseURL is the API root as Anthropic's SDKs take it, without /v1, such as
	// https://api.anthropic.com (SETTLE_ANTHROPIC_BASE_URL).
	BaseURL string
	// APIKey is sent as x-api-key (SETTLE_ANTHROPIC_API_KEY).
	APIKey string
	// AttemptTimeout bounds one attempt from send to the end of the answer; default 10 min.
	AttemptTimeout time.Duration
	// IdleTimeout bounds the wait for the first byte and between two events of a stream;
	// default 60 s.
	IdleTimeout time.Duration
	// HTTPClient is the HTTP client; its own Timeout should be zero (the adapter sets
	// deadlines).
	HTTPClient *http.Client
}

// Client sends messages to Anthropic's API with net/http. It sends no idempotency key, since
// Anthropic takes none.
type Client struct {
	cfg    Config
	sender upstream.Sender
}

var _ llm.Upstream = (*Client)(nil)

// New returns the Client.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, ops.Errorf(ops.EINVALID, "The Anthropic base URL is not set (SETTLE_ANTHROPIC_BASE_URL).")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		// The URL may hold a credential: it is not repeated.
		return nil, ops.Errorf(ops.EINVALID, "The Anthropic base URL must start with http:// or https://.")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Name == "" {
		cfg.Name = "anthropic"
	}
	cfg.AttemptTimeout, cfg.IdleTimeout, cfg.HTTPClient = upstream.Defaults(cfg.AttemptTimeout, cfg.IdleTimeout, cfg.HTTPClient)
	return &Client{cfg: cfg, sender: upstream.Sender{
		HTTPClient:       upstream.NoRedirects(cfg.HTTPClient),
		AttemptTimeout:   cfg.AttemptTimeout,
		IdleTimeout:      cfg.IdleTimeout,
		RequestIDHeaders: []string{"Request-Id"},
		Busy:             busy,
		RetryAfter:       upstream.RetryAfter,
		ErrorMessage:     errorMessage,
		// Anthropic sends message_stop last and no end mark after it.
		Stream: upstream.StreamRules{FailedMessage: streamError, EndWhenWhole: true},
	}}, nil
}

// Name implements llm.Upstream.
func (c *Client) Name() string { return c.cfg.Name }

// messagesPath is the Messages API's path under the base URL.
const messagesPath = "/v1/messages"

// Send implements llm.Upstream: one POST to the call's path (/v1/messages), with the
// client's anthropic-version (DefaultAnthropicVersion when it sent none) and anthropic-beta,
// classified.
func (c *Client) Send(ctx context.Context, call llm.Call) llm.Reply {
	path := call.Path
	if path == "" {
		path = messagesPath
	}
	req, err := http.NewRequest(http.MethodPost, c.cfg.BaseURL+path, bytes.NewReader(call.Body))
	if err != nil {
		return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_request", Message: "The request to the provider could not be built."}
	}
	req.Header.Set("X-Api-Key", c.cfg.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", llm.DefaultAnthropicVersion)
	if v := call.Header["anthropic-version"]; v != "" {
		req.Header.Set("Anthropic-Version", v)
	}
	if v := call.Header["anthropic-beta"]; v != "" {
		req.Header.Set("Anthropic-Beta", v)
	}
	if call.Stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	return c.sender.Send(ctx, req, call)
}

// streamError words an error event for the attempt, with its type and message as Anthropic
// gives them.
func streamError(data []byte) string {
	var e errorBody
	_ = json.Unmarshal(data, &e)
	what := "(no message)"
	if e.Error.Message != "" {
		what = e.Error.Type + ": " + e.Error.Message
	}
	return "The provider reported an error in the middle of the stream: " + what
}

// errorMessage is the message of an error answer.
func errorMessage(body []byte) string {
	var e errorBody
	_ = json.Unmarshal(body, &e)
	return e.Error.Message
}

// errorBody is Anthropic's error shape, in an answer and in a stream's error event.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// overloaded is the status Anthropic answers when it is too busy to take a request.
const overloaded = 529

// busy are Anthropic's refusals at the door, each billed nothing and to be tried again after
// Retry-After: a 429 (rate_limit_error), a 529 (overloaded_error) or a 503. Anthropic keeps no
// key, so a 500 (api_error) or another 5xx leaves the outcome uncertain, as the message may
// have been generated and billed before it failed.
var busy = map[int]string{
	http.StatusTooManyRequests:    "upstream_rate_limited",
	overloaded:                    "upstream_overloaded",
	http.StatusServiceUnavailable: "upstream_overloaded",
}
