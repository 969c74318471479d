package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/views"
)

// Error answers a failed request: the ops error code picks the HTTP status, API clients
// get application/problem+json and people get the error page. Internal errors are logged
// and their text never leaves the server.
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) {
	code := ops.ErrorCode(err)
	var status int
	switch code {
	case ops.ENOTFOUND:
		status = http.StatusNotFound
	case ops.ECONFLICT:
		status = http.StatusConflict
	case ops.EINVALID:
		status = http.StatusUnprocessableEntity
	case ops.EFORBIDDEN:
		status = http.StatusForbidden
	case ops.EUNAUTHORIZED:
		status = http.StatusUnauthorized
	case ops.EUNAVAILABLE:
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	case EMALFORMED:
		status = http.StatusBadRequest
	case EUNSUPPORTED:
		status = http.StatusUnsupportedMediaType
	case ETOOLARGE:
		status = http.StatusRequestEntityTooLarge
	default:
		code, status = ops.EINTERNAL, http.StatusInternalServerError
		s.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if code != ops.EINTERNAL {
		code = ops.ErrorReason(err)
	}
	s.writeError(w, r, status, code, ops.ErrorMessage(err))
}

// isAPI reports whether the client is a program, which wants problem+json, not HTML.
func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/v1/")
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	if isAPI(r) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="settle"`)
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
