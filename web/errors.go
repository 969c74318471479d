package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/views"
	"github.com/settle-dev/settle/web/sso"
)

// httpStatus is Settle's one table from an error to its HTTP status, used by every route:
// the JSON API, the LLM gateway, pipeline jobs, the MCP endpoint and the dashboard's pages.
// An error's precise reason (ops.Error.Reason) is looked up first, then its code; anything
// else is 500. Reasons are listed only where their status is not their code's. The jobs
// service uses the gateway's reasons for keys (jobs.ReasonMissingKey is
// llm.ReasonMissingKey), so a key is refused alike on both routes.
var httpStatus = map[string]int{
	// Codes of ops.Error.
	ops.ENOTFOUND:     http.StatusNotFound,
	ops.ECONFLICT:     http.StatusConflict,
	ops.EINVALID:      http.StatusUnprocessableEntity,
	ops.EFORBIDDEN:    http.StatusForbidden,
	ops.EUNAUTHORIZED: http.StatusUnauthorized,
	ops.EUNAVAILABLE:  http.StatusServiceUnavailable,
	// Codes only the transport produces (EUNSUPPORTED is also llm.ReasonUnsupportedType).
	EMALFORMED:   http.StatusBadRequest,
	EUNSUPPORTED: http.StatusUnsupportedMediaType,
	ETOOLARGE:    http.StatusRequestEntityTooLarge,
	// Reasons: the request is malformed rather than refused.
	llm.ReasonMissingKey:     http.StatusBadRequest,
	llm.ReasonInvalidKey:     http.StatusBadRequest,
	llm.ReasonMalformedJSON:  http.StatusBadRequest,
	llm.ReasonInvalidRequest: http.StatusBadRequest,
	llm.ReasonRefused:        http.StatusBadRequest,
	llm.ReasonBodyTooLarge:   http.StatusRequestEntityTooLarge,
	// Reasons: the tenant already has its share of this server's requests in flight.
	ReasonTenantBusy: http.StatusTooManyRequests,
	// Reasons: the tenant's LLM spend of the day reached its budget, what is left of it
	// cannot pay for the call's worst case, or it can but not beside its calls in flight.
	llm.ReasonBudgetSpent:    http.StatusTooManyRequests,
	llm.ReasonBudgetTooSmall: http.StatusTooManyRequests,
	llm.ReasonBudgetHeld:     http.StatusTooManyRequests,
	// Reasons: the provider behind the gateway failed.
	llm.ReasonRateLimited:      http.StatusTooManyRequests,
	llm.ReasonTimeout:          http.StatusGatewayTimeout,
	llm.ReasonUpstreamError:    http.StatusBadGateway,
	llm.ReasonBadResponse:      http.StatusBadGateway,
	llm.ReasonUnreachable:      http.StatusBadGateway,
	llm.ReasonUpstreamAuth:     http.StatusBadGateway,
	llm.ReasonGenerationFailed: http.StatusBadGateway,
	// Reasons: what the key answers is gone from Settle for good; a new key asks again.
	llm.ReasonAnswerNotStored: http.StatusGone,
	llm.ReasonAnswerPurged:    http.StatusGone,
	// Reasons: a single sign-on callback this browser's sign-in cannot accept (a used,
	// expired or foreign one, or the identity provider's refusal), and a provider that
	// could not be reached or answered something unusable.
	sso.ReasonCallback: http.StatusBadRequest,
	sso.ReasonProvider: http.StatusBadGateway,
}

// statusOf returns the HTTP status of err and the stable code a problem carries for it
// (its reason, or internal for an error that is not Settle's on purpose).
func statusOf(err error) (status int, code string) {
	reason := ops.ErrorReason(err)
	if st, ok := httpStatus[reason]; ok {
		return st, reason
	}
	if st, ok := httpStatus[ops.ErrorCode(err)]; ok {
		return st, reason
	}
	return http.StatusInternalServerError, ops.EINTERNAL
}

// Error answers a failed request with the status statusOf gives: API clients get
// application/problem+json, people get the error page. Retry-After comes from the error
// when it carries one (the gateway's), else ops.RetryAfterUnavailable for a 503. A
// provider's refusal relayed by the gateway keeps the provider's 4xx status. An outage of
// the database is a 503 even where a layer that did not recognise it called it internal.
// Internal errors are logged and their text never leaves the server.
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) {
	if ops.ErrorCode(err) == ops.EINTERNAL && ops.Unreachable(err) {
		err = ops.DatabaseUnreachable(err)
	}
	status, code := statusOf(err)
	p, _ := llm.ProblemOf(err)
	if code == llm.ReasonRefused && p.UpstreamStatus >= 400 && p.UpstreamStatus < 500 {
		status = p.UpstreamStatus
	}
	switch {
	case p.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int((p.RetryAfter+time.Second-1)/time.Second)))
	case status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(ops.RetryAfterUnavailable/time.Second)))
	}
	if ops.ErrorCode(err) == ops.EINTERNAL {
		s.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.writeError(w, r, status, code, ops.ErrorMessage(err))
}

// isAPI reports whether the client is a program, which wants problem+json, not HTML: an API
// client, an agent, or a provider delivering a webhook.
func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/mcp" ||
		strings.HasPrefix(r.URL.Path, "/webhooks/")
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	if isAPI(r) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="settle"`)
		}
		if r.URL.Path == "/v1/messages" {
			writeAnthropicError(w, status, code, detail)
			return
		}
		writeProblem(w, status, code, detail)
		return
	}
	m := views.ErrorPage{Status: status, Title: http.StatusText(status), Message: detail}
	if u := userFrom(r.Context()); u != nil {
		m.Viewer = viewer(u)
	}
	s.render(w, r, status, views.Error(m))
}

// problem is an RFC 9457 problem detail with Settle's stable error code as an extension.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// writeProblem uses type about:blank, whose title is by definition the status phrase;
// clients tell problems apart by code.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	b, err := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code})
	if err != nil {
		b = []byte(fmt.Sprintf(`{"type":"about:blank","status":%d,"code":"internal"}`, status))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeAnthropicError answers a request of Anthropic's Messages API in that API's error
// shape, which its clients read: {"type":"error","error":{"type":…,"message":…}}, with
// Settle's stable code as the error's details.error_code and the status of every route.
func writeAnthropicError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(llm.AnthropicError(anthropicErrorType(status, code), detail, code), '\n'))
}

// anthropicErrorType is the Messages API's error type of a status and Settle's code. A
// request shed under load is Anthropic's overloaded_error, which its clients take as "busy,
// come back", while other 503s (the database out of reach) stay api_error.
func anthropicErrorType(status int, code string) string {
	if code == ReasonOverloaded {
		return "overloaded_error"
	}
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound, http.StatusGone:
		return "not_found_error"
	case http.StatusConflict:
		return "conflict_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	return "api_error"
}

// writeJSON answers an API request that worked.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		s.Error(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// recoverer turns a panic in a handler into a logged internal error instead of a dropped
// connection.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.Error(w, r, fmt.Errorf("panic: %v", v))
		}()
		next.ServeHTTP(w, r)
	})
}
