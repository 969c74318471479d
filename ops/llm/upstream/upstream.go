// Package upstream is the HTTP machinery the LLM providers' adapters share to send one
// attempt: its timeouts, telling a request that never left Settle from one whose answer never
// came (ops rule 5: a timeout is an unknown outcome, never a failure), classifying an answer
// other than 200, and reading a stream of server-sent events to its end. What differs from
// one provider to another (the request's path and headers, where the answer names its
// request, which statuses mean the provider is busy, the shape of its errors, how its streams
// end) each adapter says in its Sender, so every provider's answers keep their own meaning.
package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// maxAnswer is the largest non-streaming answer read.
const maxAnswer = 32 << 20

// maxError is the most of an error answer read for its message.
const maxError = 1 << 20

// writeBuffer is the size of the write buffer of each connection to a provider (Defaults),
// a quarter of the HTTP transport's default
// (TestTheProvidersConnectionsWriteThroughASmallBuffer).
const writeBuffer = 1 << 10

// Defaults fills what an adapter's configuration leaves zero: an attempt may take 10 minutes
// in all and wait 60 s for its first byte or between two events, and the HTTP client keeps up
// to 64 idle connections to the provider, since many attempts go to the one host at once.
//
// Each connection writes through a buffer of writeBuffer bytes, which it keeps from its dial
// to its close, in flight and idle: a request's head fits it, and a body longer than what is
// left of it is written in one more write of the connection.
func Defaults(attemptTimeout, idleTimeout time.Duration, client *http.Client) (time.Duration, time.Duration, *http.Client) {
	if attemptTimeout <= 0 {
		attemptTimeout = 10 * time.Minute
	}
	if idleTimeout <= 0 {
		idleTimeout = time.Minute
	}
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.WriteBufferSize = writeBuffer
		client = &http.Client{Transport: t}
	}
	return attemptTimeout, idleTimeout, client
}

// NoRedirects is client for sending attempts: the same client, but a redirect is answered
// to the Sender as it came instead of followed. A provider that redirects a call generated
// nothing, and following would turn the POST into a GET of another address (301, 302,
// 303), whose 200 would be taken for the call's generation (ops rule 9), or send the prompt
// wherever it points (307, 308). Its 3xx is classified as a refusal: nothing ran.
func NoRedirects(client *http.Client) *http.Client {
	if client == nil {
		return nil
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Sender sends one provider's attempts and classifies their answers by that provider's rules.
type Sender struct {
	// HTTPClient sends the requests; its own Timeout should be zero (the Sender sets deadlines).
	HTTPClient *http.Client
	// AttemptTimeout bounds one attempt from send to the end of the answer.
	AttemptTimeout time.Duration
	// IdleTimeout bounds the wait for the first byte and between two events of a stream.
	IdleTimeout time.Duration
	// RequestIDHeaders are the answer's headers that may name the provider's request id, the
	// first one set counting.
	RequestIDHeaders []string
	// Busy are the statuses with which the provider refuses a request before running it,
	// billing nothing, each with its error code: the attempt is rate_limited and may be tried
	// again after RetryAfter.
	Busy map[int]string
	// RetryAfter reads how long a busy provider asks to be left alone.
	RetryAfter func(http.Header) time.Duration
	// ErrorMessage reads the message of an error answer's body, "" when it holds none.
	ErrorMessage func(body []byte) string
	// Stream is how the provider's streams end and report errors.
	Stream StreamRules
}

// StreamRules say how a provider's stream of server-sent events ends and reports an error.
type StreamRules struct {
	// Done, when set, says an event is the stream's own end mark (OpenAI's "[DONE]"), which
	// ends it well and is not passed on.
	Done func(data []byte) bool
	// Failed, when set, says an event reports an error, before the call reads it.
	Failed func(data []byte) bool
	// FailedMessage words the error an event reported, for the attempt's message.
	FailedMessage func(data []byte) string
	// EndWhenWhole ends the stream well as soon as the call's events make a whole answer
	// (llm.Call.Whole), for a provider whose last event says so; without it Whole is asked
	// only when the stream ends without its end mark.
	EndWhenWhole bool
}

// Send sends req, built by the adapter with the provider's path and headers, as one attempt of
// call: it tells the call when the request has been written (call.Sent) and when the provider
// answered (call.Answered), and returns the outcome. A request that never got written is
// not_sent; once written, no answer in time is a timeout, since the provider may have run it.
func (s *Sender) Send(ctx context.Context, req *http.Request, call llm.Call) llm.Reply {
	ctx, cancel := context.WithTimeout(ctx, s.AttemptTimeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil && !wrote.Swap(true) && call.Sent != nil {
			call.Sent()
		}
	}})
	req = req.WithContext(ctx)
	// The idle watchdog covers the wait for headers and, on a stream, each gap between
	// events; the attempt timeout covers the whole.
	idle := time.AfterFunc(s.IdleTimeout, cancel)
	defer idle.Stop()
	resp, err := s.HTTPClient.Do(req)
	if err != nil {
		if !wrote.Load() {
			return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_unreachable", Message: "The provider could not be reached."}
		}
		return llm.Reply{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout", Message: "The provider did not answer in time."}
	}
	defer resp.Body.Close()
	idle.Reset(s.IdleTimeout)
	r := llm.Reply{HTTPStatus: resp.StatusCode, RequestID: firstHeader(resp.Header, s.RequestIDHeaders)}
	if resp.StatusCode != http.StatusOK {
		return s.classify(r, resp)
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
	return s.ReadStream(r, resp.Body, call, idle)
}

// ReadStream passes each event's data to call.Event as it arrives, resetting idle at each
// line. A stream that ends before its end mark, or before its events make a whole answer,
// broke: the provider may have billed all of it, so the outcome is a timeout.
//
// Each event's data is a slice of its own, which the call may keep. Event is told whether
// the provider's next event is already read (nextBuffered): the call may then hold this one
// back to send it with the next, since the next follows without a wait for the provider.
func (s *Sender) ReadStream(r llm.Reply, body io.Reader, call llm.Call, idle *time.Timer) llm.Reply {
	// Most events fit readBuffer; a longer one is gathered below. The reader's buffer goes
	// back to readers once the stream ends: no event's data is a slice of it.
	br := readers.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
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
			idle.Reset(s.IdleTimeout)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0 && data != nil:
			if end, ok := s.event(&r, data, call, nextBuffered(br)); end {
				if ok {
					r.Outcome = ops.OutcomeOK
				}
				return r
			}
			data = nil
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

// readBuffer is the size of a stream's read buffer. A stream holds it from its first event to
// its last, so at hundreds of streams in flight it is a large share of the gateway's memory
// (TestAStreamBetweenTwoEventsHoldsASmallBuffer). The providers' events are a few hundred
// bytes, so it still holds the next event or two for nextBuffered; an event longer than it
// (a Responses API's first and last, a chunk with log probabilities) costs one allocation
// more to gather. Beneath it the HTTP transport reads the connection with a buffer of its
// own, so a smaller one here makes no more reads of the connection.
const readBuffer = 1 << 10

// readers are the buffered readers of streams that ended, for the next stream to read with
// rather than allocate a buffer of its own.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBuffer) }}

// nextBuffered reports whether br holds the whole of the stream's next event, one that
// ReadStream will pass on (its data lines say something, and its blank line has come), so
// that it follows without reading the provider again. Lines in br that hold no data (a
// comment, an event name alone) are passed over, as ReadStream passes them.
func nextBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	data := false
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		line := bytes.TrimRight(b[:i], "\r")
		b = b[i+1:]
		if len(line) == 0 {
			if data {
				return true
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			// ReadStream's data stays nil until a data line says something.
			data = data || len(bytes.TrimPrefix(v, []byte(" "))) > 0
		}
	}
}

// event takes one whole event of a stream; more says the next is already read. It says
// whether the stream ends with it, and if so whether well; a stream that ends badly has its
// outcome set in r.
func (s *Sender) event(r *llm.Reply, data []byte, call llm.Call, more bool) (end, ok bool) {
	rules := s.Stream
	if rules.Done != nil && rules.Done(data) {
		return true, true
	}
	if rules.Failed != nil && rules.Failed(data) {
		r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_stream_error", rules.FailedMessage(data)
		return true, false
	}
	if call.Event != nil {
		if err := call.Event(data, more); errors.Is(err, llm.ErrStreamFailed) {
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_stream_error", rules.FailedMessage(data)
			return true, false
		} else if err != nil {
			r.Outcome, r.ErrorCode, r.Message = ops.OutcomeTimeout, "upstream_bad_response", "The provider sent a stream event that is not one of its API's."
			return true, false
		}
	}
	r.Events++
	if rules.EndWhenWhole && call.Whole != nil && call.Whole() {
		return true, true
	}
	return false, false
}

// classify turns an answer other than 200 into an outcome. LLM providers keep no idempotency
// key, so nothing replays: a status in Busy is a refusal at the door, billed nothing; a 5xx
// or a 408 leaves the outcome uncertain, as the generation may have run and been billed
// before it failed (it is not ops' server_error, a 500 saved under a key that replays itself,
// since there is no key); other 4xx are definite refusals.
func (s *Sender) classify(r llm.Reply, resp *http.Response) llm.Reply {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxError))
	r.Message = s.ErrorMessage(body)
	st := resp.StatusCode
	if code, busy := s.Busy[st]; busy {
		r.Outcome, r.ErrorCode, r.RetryAfter = ops.OutcomeRateLimited, code, s.RetryAfter(resp.Header)
	} else if st >= 500 || st == http.StatusRequestTimeout {
		r.Outcome, r.ErrorCode = ops.OutcomeTimeout, "upstream_"+strconv.Itoa(st)
	} else if st == http.StatusUnauthorized || st == http.StatusForbidden {
		r.Outcome, r.ErrorCode = ops.OutcomeInvalid, "upstream_auth"
	} else {
		r.Outcome, r.ErrorCode = ops.OutcomeInvalid, "upstream_refused"
	}
	if r.Message == "" {
		r.Message = "The provider answered " + resp.Status + "."
	}
	return r
}

// RetryAfter reads the Retry-After header, in seconds or as an HTTP date; 0 when there is none.
func RetryAfter(h http.Header) time.Duration {
	if s, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && s > 0 {
		return Wait(s, time.Second)
	}
	if t, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// MaxRetryAfter is the longest wait a provider's Retry-After is taken to ask for.
const MaxRetryAfter = 24 * time.Hour

// Wait is n units of time, a count a provider gave (n > 0), capped at MaxRetryAfter: a
// count past the largest duration would overflow to a negative one, which the retry loop
// would read as leave to send again at once (ops rule 4). A wait that long outlasts any
// call's deadline, so the call ends and its client is told to wait instead.
func Wait(n float64, unit time.Duration) time.Duration {
	if !(n*float64(unit) < float64(MaxRetryAfter)) {
		return MaxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

func firstHeader(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}
