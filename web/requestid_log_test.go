package web

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/reqlog"
)

// On-call reads ERROR as "Settle is broken": a provider's timeout or failure, which the
// ledger records and the alerts count, is a warning; a 500 is an error.
func TestServerStatusesAreLoggedByWhoFailed(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{Logger: slog.New(reqlog.Handler(slog.NewTextHandler(&buf, nil)))}
	for status, want := range map[int]string{
		http.StatusInternalServerError: "level=ERROR",
		http.StatusBadGateway:          "level=WARN",
		http.StatusServiceUnavailable:  "level=WARN",
		http.StatusGatewayTimeout:      "level=WARN",
		http.StatusConflict:            "",
	} {
		buf.Reset()
		h := s.requestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
		got := buf.String()
		if want == "" {
			if got != "" {
				t.Errorf("%d logged %q, want nothing", status, got)
			}
			continue
		}
		if !strings.Contains(got, want) || !strings.Contains(got, "request_id="+rec.Header().Get("X-Request-Id")) {
			t.Errorf("%d logged %q, want %s with the request id", status, got, want)
		}
	}
}
