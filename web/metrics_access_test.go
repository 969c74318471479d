package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// scrape asks h for /metrics as a client whose connection comes from addr (host:port).
func scrape(t *testing.T, h http.Handler, addr string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = addr
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func wantScrape(t *testing.T, what string, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("%s: /metrics = %d, want %d\n%s", what, rec.Code, status, rec.Body)
	}
	if status == http.StatusOK && !strings.Contains(rec.Body.String(), "# HELP http_requests_total") {
		t.Fatalf("%s: /metrics answered 200 without the metrics:\n%s", what, rec.Body)
	}
	if status != http.StatusOK && (rec.Header().Get("Content-Type") != "application/problem+json" || strings.Contains(rec.Body.String(), "http_requests_total")) {
		t.Fatalf("%s: a refusal should be a problem and carry no figures: %s\n%s", what, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// Without a token or a listener of its own, /metrics, which carries every tenant's figures,
// answers loopback clients only. The connection's address decides, never X-Forwarded-For,
// and a request a proxy forwarded is not local whatever its connection.
func TestMetricsWithoutTokenAnswerLoopbackOnly(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	e := start(t, tw, h)

	wantScrape(t, "from 203.0.113.5", scrape(t, h, "203.0.113.5:1234"), http.StatusForbidden)
	wantScrape(t, "from 203.0.113.5 claiming loopback", scrape(t, h, "203.0.113.5:1234", "X-Forwarded-For", "127.0.0.1"), http.StatusForbidden)
	wantScrape(t, "from a private network", scrape(t, h, "10.0.0.8:1234"), http.StatusForbidden)
	wantScrape(t, "through a reverse proxy on this host", scrape(t, h, "127.0.0.1:9", "X-Forwarded-For", "203.0.113.5"), http.StatusForbidden)
	wantScrape(t, "through a proxy saying Forwarded", scrape(t, h, "127.0.0.1:9", "Forwarded", "for=203.0.113.5"), http.StatusForbidden)
	wantScrape(t, "from 127.0.0.1", scrape(t, h, "127.0.0.1:9"), http.StatusOK)
	wantScrape(t, "from ::1", scrape(t, h, "[::1]:9"), http.StatusOK)
	if r, body := e.get(t, client(t), "/metrics"); r.StatusCode != http.StatusOK || !strings.Contains(body, "http_requests_total") {
		t.Errorf("/metrics over a loopback connection = %d\n%s", r.StatusCode, body)
	}
	if rec := scrape(t, h, "203.0.113.5:1234"); !strings.Contains(rec.Body.String(), "SETTLE_METRICS_TOKEN") {
		t.Errorf("the refusal should say how to scrape from elsewhere:\n%s", rec.Body)
	}
}

// With a token, /metrics answers whoever bears it and nobody else, loopback included.
func TestMetricsWithTokenAnswerItsBearer(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t)
	s.MetricsToken = "metrics-token-0123456789"
	h := s.Handler()

	rec := scrape(t, h, "203.0.113.5:1234")
	wantScrape(t, "no token", rec, http.StatusUnauthorized)
	if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("a 401 should name the Bearer scheme, got %q", rec.Header().Get("WWW-Authenticate"))
	}
	wantScrape(t, "another token", scrape(t, h, "203.0.113.5:1234", "Authorization", "Bearer metrics-token-0123456780"), http.StatusUnauthorized)
	wantScrape(t, "the token as a password", scrape(t, h, "203.0.113.5:1234", "Authorization", "Basic bWV0cmljcy10b2tlbi0wMTIzNDU2Nzg5"), http.StatusUnauthorized)
	wantScrape(t, "loopback without the token", scrape(t, h, "127.0.0.1:9"), http.StatusUnauthorized)
	wantScrape(t, "the token", scrape(t, h, "203.0.113.5:1234", "Authorization", "Bearer metrics-token-0123456789"), http.StatusOK)
	wantScrape(t, "the token, scheme in lower case", scrape(t, h, "203.0.113.5:1234", "Authorization", "bearer metrics-token-0123456789"), http.StatusOK)
}

// With a listener of its own, /metrics is off the main handler and served by MetricsHandler
// alone, which answers nothing else.
func TestMetricsElsewhereLeaveTheMainHandler(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t)
	s.MetricsElsewhere = true
	h := s.Handler()
	m := s.MetricsHandler()

	if rec := scrape(t, h, "127.0.0.1:9"); rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "http_requests_total") {
		t.Fatalf("/metrics on the main handler = %d, want 404\n%s", rec.Code, rec.Body)
	}
	wantScrape(t, "the metrics handler from another host", scrape(t, m, "203.0.113.5:1234"), http.StatusOK)
	req := httptest.NewRequest(http.MethodGet, "/ops", nil)
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("the metrics handler answered /ops with %d, want 404", rec.Code)
	}
}
