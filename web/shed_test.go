package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/web"
)

// upstreamGate stands between the gateway and the fake LLM and holds the first calls that
// reach it: a plain call before it is forwarded, a stream after its first chunk reached
// the gateway (so Settle's client already reads the stream). Later calls, and the
// gateway's reads of stored completions, pass through.
type upstreamGate struct {
	url     string
	hold    int32
	seen    atomic.Int32
	arrived chan struct{}
	// releaseCalls lets the held plain calls go on; releaseStream the held stream.
	releaseCalls, releaseStream chan struct{}
	closeCalls, closeStream     sync.Once
}

func newUpstreamGate(t *testing.T, base string, hold int) *upstreamGate {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	g := &upstreamGate{hold: int32(hold), arrived: make(chan struct{}, hold),
		releaseCalls: make(chan struct{}), releaseStream: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || g.seen.Add(1) > g.hold {
			proxy.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Stream {
			proxy.ServeHTTP(&holdAfterFirstFlush{ResponseWriter: w, hold: func() {
				g.arrived <- struct{}{}
				g.wait(r, g.releaseStream)
			}}, r)
			return
		}
		g.arrived <- struct{}{}
		g.wait(r, g.releaseCalls)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	g.url = ts.URL
	return g
}

func (g *upstreamGate) wait(r *http.Request, release chan struct{}) {
	select {
	case <-release:
	case <-r.Context().Done():
	}
}

// release lets every held call go on.
func (g *upstreamGate) release() {
	g.closeStream.Do(func() { close(g.releaseStream) })
	g.closeCalls.Do(func() { close(g.releaseCalls) })
}

// waitHeld waits until n calls are held.
func (g *upstreamGate) waitHeld(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the gateway's calls never reached the provider")
		}
	}
}

// holdAfterFirstFlush passes a streamed answer on and holds it after the first flush of
// some of its body (the proxy may flush the headers alone first). A write that holds more
// than the first event is cut after it and held there: on a busy machine the proxy may read
// the whole stream, its end included, in one go, and a stream that reached its end is no
// longer held by anything.
type holdAfterFirstFlush struct {
	http.ResponseWriter
	wrote bool
	once  sync.Once
	hold  func()
}

func (h *holdAfterFirstFlush) Write(b []byte) (int, error) {
	h.wrote = true
	if i := bytes.Index(b, []byte("\n\n")) + 2; i > 1 && i < len(b) {
		n, err := h.ResponseWriter.Write(b[:i])
		if err != nil {
			return n, err
		}
		h.Flush()
		m, err := h.ResponseWriter.Write(b[i:])
		return n + m, err
	}
	return h.ResponseWriter.Write(b)
}

func (h *holdAfterFirstFlush) Flush() {
	h.ResponseWriter.(http.Flusher).Flush()
	if h.wrote {
		h.once.Do(h.hold)
	}
}

// shedWorld is the gateway behind a server capped at max requests in flight, with the
// provider behind a gate that holds the first max calls.
type shedWorld struct {
	*llmWorld
	server *web.Server
	gate   *upstreamGate
	logs   *lockedBuffer
	// calls receives the status of each held call once its answer has been read to the end.
	calls chan int
}

func newShedWorld(t *testing.T, max int, setup ...func(*web.Server)) *shedWorld {
	t.Helper()
	s, tw := newServer(t)
	for _, f := range setup {
		f(s)
	}
	w := &llmWorld{world: tw, db: tw.DB, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}}
	var base string
	w.fake, base = tw.LLM(fake.LLMOptions{Seed: 1})
	g := newUpstreamGate(t, base, max)
	w.base = g.url
	s.MaxInFlight = max
	// The MCP server is mounted but never reached: at the cap it is refused at the door.
	s.Refunds, s.RefundStatus = stubRefunds{}, stubStatus{}
	logs := &lockedBuffer{}
	w.gw, w.url = w.gateway(t, s, llmSetup{logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	// Cleanups run last first: the held calls go on before the servers close and wait for them.
	t.Cleanup(g.release)
	w.tokens["shop"] = tw.Token(tw.Tenant("shop"), "test")
	return &shedWorld{llmWorld: w, server: s, gate: g, logs: logs, calls: make(chan int, max)}
}

// fill holds max calls in flight: one stream, whose client has its first chunk, and
// max-1 plain calls.
func (w *shedWorld) fill(t *testing.T, max int) {
	t.Helper()
	started := make(chan int, 1)
	go func() {
		resp, err := w.send("/v1/chat/completions", "held-stream", chatBody("a long story", 0, true))
		if err != nil {
			started <- 0
			w.calls <- 0
			return
		}
		defer resp.Body.Close()
		// The client has the stream's first event before the gate lets the rest go.
		events, done := 0, false
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				if events++; events == 1 {
					started <- resp.StatusCode
				}
				done = done || line == "data: [DONE]"
			}
		}
		if events == 0 {
			started <- resp.StatusCode
		}
		if events < 2 || !done {
			w.calls <- 0
			return
		}
		w.calls <- resp.StatusCode
	}()
	for i := range max - 1 {
		go func() {
			resp, err := w.send("/v1/chat/completions", fmt.Sprintf("held-%d", i), chatBody("a question", 0, false))
			if err != nil {
				w.calls <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			w.calls <- resp.StatusCode
		}()
	}
	w.gate.waitHeld(t, max)
	select {
	case st := <-started:
		if st != http.StatusOK {
			t.Fatalf("the held stream answered %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held stream never started")
	}
}

// send posts body to path with the shop tenant's token and key, on plain net/http: no
// client library retries a 503 behind the test's back.
func (w *shedWorld) send(path, key, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, w.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return http.DefaultClient.Do(req)
}

// rows counts the operations and the client requests in the database.
func (w *shedWorld) rows(t *testing.T) (operations, clientRequests int) {
	t.Helper()
	return w.count(t, `SELECT count(*) FROM operations`), w.count(t, `SELECT count(*) FROM client_requests`)
}

// metric is the value of the series of name whose labels include labels; 0 when none.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// With the cap reached by held gateway calls, one stream among them, the next API request
// is answered at once with 503 problem+json and Retry-After: 1, before anything of it is
// recorded (no operation, no client request), on every API route; the stream counts
// until it ends, and once it has ended a new call goes through. A shed request never
// reaches the ledger, so ops rule 8 has nothing to record: settle_http_shed_total counts
// it, and the client may send it again as a first request.
func TestAPIShedsBeyondItsCapWithoutRecordingAnything(t *testing.T) {
	t.Parallel()
	const max = 3
	w := newShedWorld(t, max)
	w.fill(t, max)
	ops0, reqs0 := w.rows(t)
	if ops0 != max || reqs0 != max {
		t.Fatalf("held calls recorded %d operations and %d client requests, want %d of each", ops0, reqs0, max)
	}

	resp, err := w.send("/v1/chat/completions", "shed-1", chatBody("one more", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := wantProblem(t, resp, http.StatusServiceUnavailable, web.ReasonOverloaded)
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if !strings.Contains(p.Detail, "again") {
		t.Errorf("the problem does not tell the client to come back: %q", p.Detail)
	}
	for _, path := range []string{"/v1/embeddings", "/v1/responses", "/v1/messages", "/api/v1/refunds", "/mcp"} {
		resp, err := w.send(path, "shed-2", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("POST %s at the cap: %d, Retry-After %q; want 503 and 1", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if ops1, reqs1 := w.rows(t); ops1 != ops0 || reqs1 != reqs0 {
		t.Errorf("shed requests recorded something: %d→%d operations, %d→%d client requests", ops0, ops1, reqs0, reqs1)
	}
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key LIKE 'shed-%'`); n != 0 {
		t.Errorf("a shed request opened %d operations", n)
	}
	for _, route := range []string{"/v1/chat/completions", "/v1/messages", "/api/v1/refunds", "/mcp"} {
		if got := metric(t, w.server.Registry, "settle_http_shed_total", map[string]string{"route": route}); got != 1 {
			t.Errorf("settle_http_shed_total of %s: %v, want 1", route, got)
		}
	}
	// Six requests shed within a second of each other make one warning, not six.
	if warnings := w.logs.count(t, "msg", "API request shed: too many in flight"); warnings != 1 {
		t.Errorf("%d warnings of shed requests, want 1", warnings)
	}
	if got := metric(t, w.server.Registry, "settle_http_in_flight", nil); got != max {
		t.Errorf("settle_http_in_flight at the cap: %v, want %d", got, max)
	}

	// The stream ends: its place frees once its handler has returned.
	w.gate.closeStream.Do(func() { close(w.gate.releaseStream) })
	if st := <-w.calls; st != http.StatusOK {
		t.Fatalf("the held stream ended with %d", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, w.server.Registry, "settle_http_in_flight", nil) != max-1 {
		if time.Now().After(deadline) {
			t.Fatal("the ended stream still counts as in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err = w.send("/v1/chat/completions", "after", chatBody("one more", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a call below the cap again: %d %s", resp.StatusCode, b)
	}

	w.gate.release()
	for range max - 1 {
		if st := <-w.calls; st != http.StatusOK {
			t.Errorf("a held call ended with %d", st)
		}
	}
}

// While the API is at its cap, the probes and the dashboard still answer: the sign-in page
// and /readyz are never counted, so people can open the dashboard during an overload.
func TestDashboardAndProbesAnswerWhileTheAPIIsAtItsCap(t *testing.T) {
	t.Parallel()
	const max = 2
	w := newShedWorld(t, max)
	w.fill(t, max)
	resp, err := w.send("/v1/chat/completions", "shed", chatBody("one more", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the API at its cap answered %d, want 503", resp.StatusCode)
	}
	w.wantPagesAnswer(t, "while the API is at its cap")
	w.gate.release()
	for range max {
		<-w.calls
	}
}

// When the ledger's writes wait longer than MaxWriteBacklog for a batch, an API request is
// refused as at the in-flight cap: 503 overloaded with Retry-After: 1, before its token or
// body is read, so nothing of it is recorded (ops rule 8: refused before it names its
// tenant, it is counted by settle_http_shed_total with reason write_backlog, not by the
// ledger). The dashboard and the probes still answer; back under the limit, the request is
// served.
func TestAPIShedsWhileTheLedgerWritesAreBehind(t *testing.T) {
	t.Parallel()
	var backlog atomic.Int64
	w := newShedWorld(t, 0, func(s *web.Server) {
		s.WriteBacklog = func() time.Duration { return time.Duration(backlog.Load()) }
		s.MaxWriteBacklog = 250 * time.Millisecond
	})
	backlog.Store(int64(400 * time.Millisecond))
	for i, path := range []string{"/v1/chat/completions", "/api/v1/refunds", "/mcp"} {
		resp, err := w.send(path, "behind", chatBody("one more", 0, false))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			p := wantProblem(t, resp, http.StatusServiceUnavailable, web.ReasonOverloaded)
			if !strings.Contains(p.Detail, "behind") || !strings.Contains(p.Detail, "again") {
				t.Errorf("the problem does not say the ledger is behind and to come back: %q", p.Detail)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("POST %s behind: %d, Retry-After %q; want 503 and 1", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if ops, reqs := w.rows(t); ops != 0 || reqs != 0 {
		t.Errorf("shed requests recorded %d operations and %d client requests, want none", ops, reqs)
	}
	reg := w.server.Registry
	if got := metric(t, reg, "settle_http_shed_total", map[string]string{"reason": "write_backlog"}); got != 1 {
		t.Errorf("settle_http_shed_total{reason=write_backlog} of one route: %v, want 1", got)
	}
	if got := metric(t, reg, "settle_http_shed_total", map[string]string{"reason": "in_flight"}); got != 0 {
		t.Errorf("settle_http_shed_total{reason=in_flight}: %v, want 0", got)
	}
	if got := metric(t, reg, "settle_ledger_write_backlog_seconds", nil); got != 0.4 {
		t.Errorf("settle_ledger_write_backlog_seconds: %v, want 0.4", got)
	}
	if warnings := w.logs.count(t, "reason", "write_backlog"); warnings != 1 {
		t.Errorf("%d warnings naming the write backlog, want 1", warnings)
	}
	w.wantPagesAnswer(t, "while the ledger is behind")

	backlog.Store(int64(100 * time.Millisecond))
	resp, err := w.send("/v1/chat/completions", "caught-up", chatBody("one more", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a call under the backlog limit: %d %s", resp.StatusCode, b)
	}
}

// wantPagesAnswer checks that the probes and the dashboard's sign-in page answer 200, which
// shedding never refuses; when says in what state.
func (w *shedWorld) wantPagesAnswer(t *testing.T, when string) {
	t.Helper()
	for _, path := range []string{"/readyz", "/healthz", "/login"} {
		resp, err := http.Get(w.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s %s: %d, want 200", path, when, resp.StatusCode)
		}
	}
}
