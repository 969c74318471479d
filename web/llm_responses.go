package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ResponseReader is what GET /v1/responses/{id} needs: the LLM gateway of ops/llm.
type ResponseReader interface {
	Retrieve(ctx context.Context, r llm.Retrieval, out llm.Sink) error
}

// handleGetResponse is GET /v1/responses/{id}: a response one of the tenant's own calls
// created through Settle, as OpenAI's Retrieve answers it (llm.Gateway.Retrieve); with
// stream=true (in the query, or in a JSON body as the official SDKs send it) its events after
// starting_after.
func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	g, ok := s.LLM.(ResponseReader)
	if !ok {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "The LLM gateway is not configured."))
		return
	}
	q := r.URL.Query()
	stream, err := strconv.ParseBool(q.Get("stream"))
	if q.Get("stream") == "" {
		var body struct {
			Stream bool `json:"stream"`
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		stream, err = json.Unmarshal(b, &body) == nil && body.Stream, nil
	}
	if err != nil {
		s.Error(w, r, &ops.Error{Code: ops.EINVALID, Reason: llm.ReasonInvalidRequest, Message: "stream must be true or false."})
		return
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		if after, err = strconv.Atoi(v); err != nil || after < 0 {
			s.Error(w, r, &ops.Error{Code: ops.EINVALID, Reason: llm.ReasonInvalidRequest, Message: "starting_after must be a sequence number, 0 or more."})
			return
		}
	}
	timeout := s.StreamWriteTimeout
	if timeout <= 0 {
		timeout = defaultStreamWriteTimeout
	}
	sink := &httpSink{w: w, rc: http.NewResponseController(w), timeout: timeout}
	err = g.Retrieve(r.Context(), llm.Retrieval{Tenant: tenantFrom(r.Context()), ID: chi.URLParam(r, "id"), Stream: stream, After: after}, sink)
	switch {
	case err == nil:
	case sink.began:
		s.Logger.WarnContext(r.Context(), "reading a response failed after the answer began", "err", err)
	default:
		s.Error(w, r, err)
	}
}

// ResponseCanceller is what POST /v1/responses/{id}/cancel needs: the LLM gateway of ops/llm.
type ResponseCanceller interface {
	Cancel(ctx context.Context, c llm.Cancellation, out llm.Sink) error
	// RefuseCancel records a cancel refused before it was read, and returns its answer.
	RefuseCancel(ctx context.Context, tenant *ops.Tenant, requestRef string, refusal error) error
}

// handleCancelResponse is POST /v1/responses/{id}/cancel: OpenAI's cancel of a background
// response, for a response one of the tenant's own calls created through Settle only
// (llm.Gateway.Cancel), sent to the provider once and answered as the provider answers; it
// is recorded as the tenant's client request, with its X-Request-Ref (ops rule 8).
func (s *Server) handleCancelResponse(w http.ResponseWriter, r *http.Request) {
	g, ok := s.LLM.(ResponseCanceller)
	if !ok {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "The LLM gateway is not configured."))
		return
	}
	timeout := s.StreamWriteTimeout
	if timeout <= 0 {
		timeout = defaultStreamWriteTimeout
	}
	sink := &httpSink{w: w, rc: http.NewResponseController(w), timeout: timeout}
	ref, refFrom := refSource(r, "")
	err := g.Cancel(r.Context(), llm.Cancellation{Tenant: tenantFrom(r.Context()), ID: chi.URLParam(r, "id"),
		RequestRef: ref, RequestRefFrom: refFrom}, sink)
	switch {
	case err == nil:
	case sink.began:
		s.Logger.WarnContext(r.Context(), "cancelling a response failed after the answer began", "err", err)
	default:
		s.Error(w, r, err)
	}
}
