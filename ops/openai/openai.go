// Package openai is the adapter of an OpenAI-compatible LLM provider over net/http: it
// sends the gateway's requests (chat completions and responses, JSON or an SSE stream, and
// embeddings, each to its own path) and the job workers' chat completions, and
// classifies each reply into an attempt outcome (Client, which implements llm.Upstream), it
// reads the provider's stored completions through the official openai-go SDK so a call whose
// answer was lost can be looked up (Client, an llm.StoredCompletions), and it reads the
// provider's usage report for the reconciler (UsageReader, a recon.UsageSource).
package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
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
	cfg   Config
	sdk   sdk.Client
	store storeState
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
	return &Client{cfg: cfg, sdk: newSDK(cfg)}, nil
}

// Name implements llm.Upstream.
func (o *Client) Name() string { return o.cfg.Name }

// maxAnswer is the largest non-streaming answer read.
const maxAnswer = 32 << 20

// Send implements llm.Upstream: one POST to the call's path (/chat/completions by default),
// or the call's GET (a background response read again), classified. The client's own keys among Settle's metadata never leave (untagged). When
// the provider stores completions, a chat completion's body asks it to, tagged with the
// operation (tagBody); a provider that refuses store in auto mode (a 400 about it, which
// billed nothing) is remembered and sent the body untagged. Other APIs are sent untagged:
// lookups read only stored chat completions.
func (o *Client) Send(ctx context.Context, c llm.Call) llm.Reply {
	plain, fields := untagged(c.Body)
	c.Body = plain
	if (c.Path != "" && c.Path != llm.ChatPath) || o.StoreState(ctx) != llm.StoreOn {
		return o.send(ctx, c)
	}
	tagged, ok := tagBody(fields, c.OperationID, c.TenantID)
	if !ok {
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

func (o *Client) send(ctx context.Context, c llm.Call) llm.Reply {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.AttemptTimeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil && !wrote.Swap(true) && c.Sent != nil {
			c.Sent()
		}
	}})
	path, method := c.Path, c.Method
	if path == "" {
		path = llm.ChatPath
	}
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, o.cfg.BaseURL+path, bytes.NewReader(c.Body))
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
	// The idle watchdog covers the wait for headers and, on a stream, each gap between
	// events; the attempt timeout covers the whole.
	idle := time.AfterFunc(o.cfg.IdleTimeout, cancel)
	defer idle.Stop()
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		if !wrote.Load() {
			return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_unreachable", Message: "The provider could not be reached."}
		}
		return llm.Reply{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout", Message: "The provider did not answer in time."}
	}
	defer resp.Body.Close()
	idle.Reset(o.cfg.IdleTimeout)
	r := llm.Reply{HTTPStatus: resp.StatusCode, RequestID: firstHeader(resp.Header, "x-request-id", "request-id")}
	if resp.StatusCode != http.StatusOK {
		return classifyError(r, resp)
	}
	if c.Answered != nil {
		c.Answered(r.RequestID)
	}
	if !c.Stream {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_timeout", "The provider's answer broke off."
			return r
		}
		r.Body = body
		r.Outcome = ops.OutcomeOK
		return r
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_bad_response", "The provider answered a stream request with "+strconv.Quote(ct)+"."
		return r
	}
	return o.readStream(r, resp.Body, c, idle)
}

// readStream passes each event's data to c.Event as it arrives. A stream that ends without
// [DONE] broke (the provider may have billed it all), unless c.Whole says its events made a
// whole answer, as the streams of APIs that send no [DONE] end.
func (o *Client) readStream(r llm.Reply, body io.Reader, c llm.Call, idle *time.Timer) llm.Reply {
	// Most events fit the default 4 KiB; a longer one is gathered below.
	br := bufio.NewReader(body)
	var data []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long event: gather the rest of the line.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(line) > 0 {
			idle.Reset(o.cfg.IdleTimeout)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0:
			if data != nil {
				if bytes.Equal(data, []byte("[DONE]")) {
					r.Outcome = ops.OutcomeOK
					return r
				}
				if hasError(data) {
					r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_stream_error", "The provider reported an error in the middle of the stream."
					return r
				}
				if c.Event != nil {
					if err := c.Event(data); errors.Is(err, llm.ErrStreamFailed) {
						r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_stream_error", "The provider reported an error in the middle of the stream."
						return r
					} else if err != nil {
						r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_bad_response", "The provider sent a stream event that is not one of its API's."
						return r
					}
				}
				r.Events++
				data = nil
			}
		case bytes.HasPrefix(trimmed, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(trimmed, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
		if err != nil {
			if data == nil && c.Whole != nil && c.Whole() {
				r.Outcome = ops.OutcomeOK
				return r
			}
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "stream_broken", "The provider's stream broke off before it ended."
			return r
		}
	}
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

// classifyError turns a non-200 answer into an outcome. LLM providers keep no key, so
// nothing replays: a 5xx leaves the outcome uncertain (the generation may have run and been
// billed), 429 and 503 are refusals at the door, other 4xx are definite refusals.
func classifyError(r llm.Reply, resp *http.Response) llm.Reply {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	r.Message = e.Error.Message
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		r.Outcome, r.ErrorCode = ops.OutcomeRateLimited, "upstream_rate_limited"
		if s == http.StatusServiceUnavailable {
			r.ErrorCode = "upstream_unavailable"
		}
		r.RetryAfter = retryAfter(resp.Header)
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
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	if s, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}
