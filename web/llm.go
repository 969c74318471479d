package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ChatGateway is what the LLM gateway's routes need: the LLM gateway of ops/llm.
type ChatGateway interface {
	Complete(ctx context.Context, req llm.Request, out llm.Sink) error
	// Refuse records a call refused before it could be read and returns its answer: the
	// refusal, or the outage that kept it from being recorded.
	Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error
}

// handleChatCompletions is POST /v1/chat/completions: an OpenAI-compatible chat completion
// that runs at most once per Idempotency-Key.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	s.serveLLM(w, r, "/v1/chat/completions")
}

// handleEmbeddings is POST /v1/embeddings: OpenAI-compatible embeddings, requested from the
// provider at most once per Idempotency-Key.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	s.serveLLM(w, r, "/v1/embeddings")
}

// handleResponses is POST /v1/responses: OpenAI's Responses API, JSON or a stream of
// events, generated at most once per Idempotency-Key.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	s.serveLLM(w, r, "/v1/responses")
}

// handleMessages is POST /v1/messages: Anthropic's Messages API, JSON or a stream of events,
// generated at most once per Idempotency-Key. Its errors are in Anthropic's shape
// (writeError).
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	s.serveLLM(w, r, "/v1/messages")
}

// pendingCloses is what a gateway that answers calls before their close tells of the
// closes still being written: ops/llm's Gateway.PendingCloses.
type pendingCloses interface {
	PendingCloses() int64
}

// registerLLMMetrics exports the gateway's closes pending after their answer: a client
// answered early leaves its call's close behind it, which a database that falls behind
// piles up unseen, and which a shutdown waits for (Gateway.Drain). One figure for the
// process, read when scraped; no tenant label, as the backlog is the database's.
func (s *Server) registerLLMMetrics() {
	p, ok := s.LLM.(pendingCloses)
	if !ok {
		return
	}
	register(s.Registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "settle_llm_pending_closes",
		Help: "LLM calls whose client had its whole answer and whose close is still being written by this process.",
	}, func() float64 { return float64(p.PendingCloses()) }))
}

// serveLLM answers one request of a route of the gateway. The gateway decides
// everything; this turns HTTP into its Request and Sink and its errors into problems.
func (s *Server) serveLLM(w http.ResponseWriter, r *http.Request, route string) {
	if s.LLM == nil {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "The LLM gateway is not configured."))
		return
	}
	key, hasKey := idempotencyKey(r)
	ref, refFrom := refSource(r, "")
	timeout := s.StreamWriteTimeout
	if timeout <= 0 {
		timeout = defaultStreamWriteTimeout
	}
	sink := &httpSink{w: w, rc: http.NewResponseController(w), timeout: timeout}
	t := tenantFrom(r.Context())
	req := llm.Request{
		Tenant: t, Route: route,
		// The gateway parses the key with llm.ParseKey, as the jobs route does.
		Key: key, HasKey: hasKey,
		ContentType: r.Header.Get("Content-Type"), Body: r.Body, Prefer: r.Header.Get("Prefer"),
		RequestRef: ref, RequestRefFrom: refFrom,
		ChatRef: r.Header.Get("Settle-Chat-Ref"), Header: r.Header.Get,
		// The cap the budget set goes out with the answer's head, or its refusal's.
		OutputCap: func(n int64) { w.Header().Set("Settle-Output-Cap", strconv.FormatInt(n, 10)) },
	}
	if sl := shareSlotFrom(r); sl != nil {
		req.Following = sl.follow
		if sl.lent {
			req.Busy = func(opID string) error { return s.share.busy(r, t, opID) }
		}
	}
	err := s.LLM.Complete(r.Context(), req, sink)
	switch {
	case err == nil:
	case sink.began:
		s.Logger.WarnContext(r.Context(), "LLM call failed after the answer began", "route", route, "err", err)
	default:
		s.Error(w, r, err)
	}
}

// defaultStreamWriteTimeout is Server.StreamWriteTimeout's default: a client that reads at
// all takes each chunk within milliseconds; one that stopped reading is let go after this.
const defaultStreamWriteTimeout = 10 * time.Second

// httpSink writes the gateway's answer: JSON with its length, sent when the handler
// returns, or an SSE stream flushed event by event, its head with its first event and its
// closing event with the end of the response. Every write has its own deadline, so
// a client that stops reading fails the write instead of blocking the gateway, which
// would stop reading the provider and hold the operation's lease.
type httpSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	began   bool
	stream  bool
	// flush sends a JSON answer as it is written: the request goes on after it (Head.Close).
	flush bool
	// deadline is the connection's write deadline as extend last set it.
	deadline time.Time
}

// extend gives the next write its own deadline. It is a time of the connection, so it
// is read from the wall clock, never from the server's clock, which tests may stop. The
// last deadline bounds the server's final flush after the handler returns too; net/http
// lifts it before the connection's next request. Moving the connection's deadline is work
// for the runtime's poller at every event of a stream, so one set less than a 64th of the
// timeout ago is kept: every write still has at least 63/64 of the timeout.
func (k *httpSink) extend() {
	d := time.Now().Add(k.timeout)
	if !k.deadline.IsZero() && d.Sub(k.deadline) < k.timeout/64 {
		return
	}
	k.deadline = d
	_ = k.rc.SetWriteDeadline(d)
}

func (k *httpSink) Begin(h llm.Head) error {
	k.began, k.stream = true, h.Stream
	hd := k.w.Header()
	if h.Stream {
		hd.Set("Content-Type", "text/event-stream; charset=utf-8")
		hd.Set("Cache-Control", "no-cache")
		hd.Set("X-Accel-Buffering", "no")
	} else {
		hd.Set("Content-Type", "application/json")
	}
	if h.Replayed {
		hd.Set("Idempotent-Replayed", "true")
	}
	if h.OperationID != "" {
		hd.Set("Settle-Operation-Id", h.OperationID)
	}
	if h.ProviderRequestID != "" {
		// The provider's id of its request; X-Request-Id stays Settle's own (requestID).
		hd.Set("Settle-Provider-Request-Id", h.ProviderRequestID)
	}
	if h.PreferenceApplied != "" {
		hd.Set("Preference-Applied", h.PreferenceApplied)
	}
	if h.Close {
		hd.Set("Connection", "close")
		k.flush = true
	}
	if h.ResumedAfter != "" {
		// The stream goes on after the event the client's Last-Event-ID named.
		hd.Set("Settle-Resumed-After", h.ResumedAfter)
	}
	if !h.Stream && h.Length > 0 {
		hd.Set("Content-Length", strconv.Itoa(h.Length))
	}
	// A stream's head is not sent alone: the gateway writes the first event right after
	// Begin, and it goes with it, in one send.
	k.w.WriteHeader(http.StatusOK)
	return nil
}

func (k *httpSink) Write(p []byte) error {
	k.extend()
	if _, err := k.w.Write(p); err != nil {
		return err
	}
	if !k.stream && !k.flush {
		return nil
	}
	return k.rc.Flush()
}

// Hold writes part of a stream without sending it: the gateway's next Write or Flush sends
// it, with the event that follows (llm.HoldingSink). Its bytes may still reach the
// connection if the response's buffer fills, so it has a deadline as every write does.
func (k *httpSink) Hold(p []byte) error {
	k.extend()
	_, err := k.w.Write(p)
	return err
}

// End writes the last part of a stream without sending it: the end of the response, as the
// handler returns, sends it, with what Hold wrote and the chunked body's end, in one send
// (llm.EndingSink).
func (k *httpSink) End(p []byte) error {
	k.extend()
	_, err := k.w.Write(p)
	return err
}

// Flush sends what Hold wrote.
func (k *httpSink) Flush() error {
	k.extend()
	return k.rc.Flush()
}
