package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// serveWith runs the program as 'settle serve' on loopback port 0 with vars, on a database of
// its own unless vars name one.
func serveWith(t *testing.T, vars map[string]string) *Program {
	t.Helper()
	if vars["DATABASE_URL"] == "" {
		vars["DATABASE_URL"] = pgtest.URL(pgtest.NewDatabase(t))
	}
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(vars), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(context.Background()); err != nil {
		p.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func getWith(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With SETTLE_METRICS_ADDR, /metrics is served there, with the process's and the HTTP
// layer's series, and is not on the main listener at all.
func TestServeMetricsOnTheirOwnAddress(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{"SETTLE_METRICS_ADDR": "127.0.0.1:0"})
	if p.MetricsURL() == "" || p.MetricsURL() == p.URL() {
		t.Fatalf("metrics at %q, main listener at %q; want a listener of its own", p.MetricsURL(), p.URL())
	}
	if code, body := getWith(t, p.URL()+"/metrics"); code != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics on the main listener = %d, want 404\n%s", code, body)
	}
	code, body := getWith(t, p.MetricsURL()+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, `http_requests_total{code="404",method="GET",route="unmatched"} 1`) {
		t.Errorf("/metrics on its own listener = %d, want 200 with the process's and the HTTP series\n%s", code, body)
	}
	if code, _ := getWith(t, p.MetricsURL()+"/healthz"); code != http.StatusNotFound {
		t.Errorf("the metrics listener answered /healthz with %d; it serves /metrics only", code)
	}
}

// With SETTLE_METRICS_TOKEN, the main listener's /metrics answers the token's bearer only,
// loopback clients included.
func TestServeMetricsWithToken(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef0123456789abcdef"
	p := serveWith(t, map[string]string{"SETTLE_METRICS_TOKEN": token})
	if code, body := getWith(t, p.URL()+"/metrics"); code != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics without the token = %d, want 401\n%s", code, body)
	}
	if code, body := getWith(t, p.URL()+"/metrics", "Authorization", "Bearer "+token); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with the token = %d, want 200\n%s", code, body)
	}
}

// Without either setting, the main listener's /metrics answers its loopback clients, as a
// Prometheus on the same host scrapes it.
func TestServeMetricsToLoopbackByDefault(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{})
	if code, body := getWith(t, p.URL()+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics from loopback = %d, want 200\n%s", code, body)
	}
}

func TestMetricsSettingsMistakes(t *testing.T) {
	t.Parallel()
	const short = "hunter2hunter2"
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"SETTLE_METRICS_ADDR": "9090"}, `SETTLE_METRICS_ADDR="9090" is not host:port`},
		{map[string]string{"SETTLE_METRICS_ADDR": "127.0.0.1:8080"}, "is the main listen address"},
		{map[string]string{"SETTLE_METRICS_TOKEN": short}, "SETTLE_METRICS_TOKEN must be at least 16 characters"},
		{map[string]string{"SETTLE_METRICS_TOKEN": "0123456789abcdef 0123"}, "no spaces"},
	} {
		c.vars["DATABASE_URL"] = "postgres://settle@localhost/settle"
		code, _, stderr := run(t, []string{"serve"}, c.vars, "")
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", c.vars, code, stderr, c.want)
		}
		if strings.Contains(stderr, short) {
			t.Errorf("the message repeats the token: %q", stderr)
		}
	}
}
