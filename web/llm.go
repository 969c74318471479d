package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ChatGateway is what the OpenAI-compatible route needs: the LLM gateway of ops/llm.
type ChatGateway interface {
	Complete(ctx context.Context, req llm.Request, out llm.Sink) error
}

// handleChatCompletions is POST /v1/chat/completions: an OpenAI-compatible chat completion
// that runs at most once per Idempotency-Key. The gateway decides everything; this turns
// HTTP into its Request and Sink and its errors into problems.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	if s.LLM == nil {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "The LLM gateway is not configured."))
		return
	}
	keys := r.Header.Values("Idempotency-Key")
	sink := &httpSink{w: w, rc: http.NewResponseController(w)}
	err := s.LLM.Complete(r.Context(), llm.Request{
		Tenant: tenantFrom(r.Context()), Route: "/v1/chat/completions",
		// Two Idempotency-Key headers are malformed: joined by a newline, they fail validation.
		Key: strings.Join(keys, "\n"), HasKey: len(keys) > 0,
		ContentType: r.Header.Get("Content-Type"), Body: r.Body, Prefer: r.Header.Get("Prefer"),
		RequestRef: firstNonEmpty(r.Header.Get("X-Client-Request-Id"), r.Header.Get("X-Request-Ref")),
		ChatRef:    r.Header.Get("Settle-Chat-Ref"),
	}, sink)
	switch {
	case err == nil:
	case sink.began:
		s.Logger.WarnContext(r.Context(), "chat completion failed after the answer began", "err", err)
	default:
		s.llmError(w, r, err)
	}
}

// llmStatus maps the gateway's reasons to statuses s.Error has no code for.
var llmStatus = map[string]int{
	llm.ReasonMissingKey:       http.StatusBadRequest,
	llm.ReasonInvalidKey:       http.StatusBadRequest,
	llm.ReasonMalformedJSON:    http.StatusBadRequest,
	llm.ReasonInvalidRequest:   http.StatusBadRequest,
	llm.ReasonBodyTooLarge:     http.StatusRequestEntityTooLarge,
	llm.ReasonUnsupportedType:  http.StatusUnsupportedMediaType,
	llm.ReasonKeyInUse:         http.StatusConflict,
	llm.ReasonOutcomeUnknown:   http.StatusConflict,
	llm.ReasonKeyReused:        http.StatusUnprocessableEntity,
	llm.ReasonRateLimited:      http.StatusTooManyRequests,
	llm.ReasonTimeout:          http.StatusGatewayTimeout,
	llm.ReasonUpstreamError:    http.StatusBadGateway,
	llm.ReasonBadResponse:      http.StatusBadGateway,
	llm.ReasonUnreachable:      http.StatusBadGateway,
	llm.ReasonUpstreamAuth:     http.StatusBadGateway,
	llm.ReasonGenerationFailed: http.StatusBadGateway,
	llm.ReasonRefused:          http.StatusBadRequest,
}

// llmError answers a gateway error as problem+json, with Retry-After when the gateway gives
// one. A provider's refusal keeps the provider's 4xx status.
func (s *Server) llmError(w http.ResponseWriter, r *http.Request, err error) {
	reason := ops.ErrorReason(err)
	status, ok := llmStatus[reason]
	if !ok {
		s.Error(w, r, err)
		return
	}
	p, _ := llm.ProblemOf(err)
	if reason == llm.ReasonRefused && p.UpstreamStatus >= 400 && p.UpstreamStatus < 500 {
		status = p.UpstreamStatus
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((p.RetryAfter+999_999_999)/1_000_000_000)))
	}
	s.writeError(w, r, status, reason, ops.ErrorMessage(err))
}

// httpSink writes the gateway's answer: JSON with its length, sent when the handler
// returns, or an SSE stream flushed event by event.
type httpSink struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	began  bool
	stream bool
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
		hd.Set("X-Request-Id", h.ProviderRequestID)
	}
	if h.PreferenceApplied != "" {
		hd.Set("Preference-Applied", h.PreferenceApplied)
	}
	if !h.Stream && h.Length > 0 {
		hd.Set("Content-Length", strconv.Itoa(h.Length))
	}
	k.w.WriteHeader(http.StatusOK)
	if !h.Stream {
		return nil
	}
	return k.rc.Flush()
}

func (k *httpSink) Write(p []byte) error {
	if _, err := k.w.Write(p); err != nil {
		return err
	}
	if !k.stream {
		return nil
	}
	return k.rc.Flush()
}
