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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
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
	cfg Config
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
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 10 * time.Minute
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = time.Minute
	}
	if cfg.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		cfg.HTTPClient = &http.Client{Transport: t}
	}
	return &Client{cfg: cfg}, nil
}

// Name implements llm.Upstream.
func (c *Client) Name() string { return c.cfg.Name }

// maxAnswer is the largest non-streaming answer read.
const maxAnswer = 32 << 20

// messagesPath is the Messages API's path under the base URL.
const messagesPath = "/v1/messages"

// Send implements llm.Upstream: one POST to the call's path (/v1/messages), with the
// client's anthropic-version (DefaultAnthropicVersion when it sent none) and anthropic-beta,
// classified.
func (c *Client) Send(ctx context.Context, call llm.Call) llm.Reply {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil && !wrote.Swap(true) && call.Sent != nil {
			call.Sent()
		}
	}})
	path := call.Path
	if path == "" {
		path = messagesPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.BaseURL+path, bytes.NewReader(call.Body))
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
	// The idle watchdog covers the wait for headers and, on a stream, each gap between
	// events; the attempt timeout covers the whole.
	idle := time.AfterFunc(c.cfg.IdleTimeout, cancel)
	defer idle.Stop()
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		if !wrote.Load() {
			return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_unreachable", Message: "The provider could not be reached."}
		}
		return llm.Reply{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout", Message: "The provider did not answer in time."}
	}
	defer resp.Body.Close()
	idle.Reset(c.cfg.IdleTimeout)
	r := llm.Reply{HTTPStatus: resp.StatusCode, RequestID: resp.Header.Get("Request-Id")}
	if resp.StatusCode != http.StatusOK {
		return classify(r, resp)
	}
	if call.Answered != nil {
		call.Answered(r.RequestID)
	}
	if !call.Stream {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_timeout", "The provider's answer broke off."
			return r
		}
		r.Body, r.Outcome = body, ops.OutcomeOK
		return r
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_bad_response", "The provider answered a stream request with "+strconv.Quote(ct)+"."
		return r
	}
	return c.readStream(r, resp.Body, call, idle)
}

// readStream passes each event's data to call.Event as it arrives. The stream ends well once
// its events make a whole message (call.Whole: message_stop came), which Anthropic sends
// last; a stream that ends before broke, and the provider may have billed all of it.
func (c *Client) readStream(r llm.Reply, body io.Reader, call llm.Call, idle *time.Timer) llm.Reply {
	br := bufio.NewReader(body)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			idle.Reset(c.cfg.IdleTimeout)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0 && data != nil:
			if call.Event != nil {
				if err := call.Event(data); errors.Is(err, llm.ErrStreamFailed) {
					r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_stream_error", "The provider reported an error in the middle of the stream: "+streamError(data)
					return r
				} else if err != nil {
					r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_bad_response", "The provider sent a stream event that is not one of its API's."
					return r
				}
			}
			r.Events++
			data = nil
			if call.Whole != nil && call.Whole() {
				r.Outcome = ops.OutcomeOK
				return r
			}
		case bytes.HasPrefix(trimmed, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(trimmed, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
		if err != nil {
			if data == nil && call.Whole != nil && call.Whole() {
				r.Outcome = ops.OutcomeOK
				return r
			}
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "stream_broken", "The provider's stream broke off before it ended."
			return r
		}
	}
}

// streamError is the message of an error event, as the provider words it.
func streamError(data []byte) string {
	var e errorBody
	_ = json.Unmarshal(data, &e)
	if e.Error.Message == "" {
		return "(no message)"
	}
	return e.Error.Type + ": " + e.Error.Message
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

// classify turns a non-200 answer into an outcome. Anthropic keeps no key, so nothing
// replays: a 429 (rate_limit_error) or 529 (overloaded_error) is a refusal at the door, to
// be tried again after Retry-After, and billed nothing; a 500 (api_error) or another 5xx
// leaves the outcome uncertain, as the message may have been generated and billed before it
// failed (it is not ops' server_error, a 500 saved under a key that replays itself, since
// there is no key); other 4xx are definite refusals.
func classify(r llm.Reply, resp *http.Response) llm.Reply {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e errorBody
	_ = json.Unmarshal(body, &e)
	r.Message = e.Error.Message
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests:
		r.Outcome, r.ErrorCode, r.RetryAfter = ops.OutcomeRateLimited, "upstream_rate_limited", retryAfter(resp.Header)
	case s == overloaded || s == http.StatusServiceUnavailable:
		r.Outcome, r.ErrorCode, r.RetryAfter = ops.OutcomeRateLimited, "upstream_overloaded", retryAfter(resp.Header)
	case s >= 500 || s == http.StatusRequestTimeout:
		r.Outcome, r.ErrorCode = ops.OutcomeTimeout, "upstream_"+strconv.Itoa(s)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		r.Outcome, r.ErrorCode = ops.OutcomeInvalid, "upstream_auth"
	default:
		r.Outcome, r.ErrorCode = ops.OutcomeInvalid, "upstream_refused"
	}
	if r.Message == "" {
		r.Message = "The provider answered " + resp.Status + "."
	}
	return r
}

func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
