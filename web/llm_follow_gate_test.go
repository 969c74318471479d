package web_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// followGate stands between the gateway and the fake LLM and, while shut, holds every
// read of a background response's stream (GET /v1/responses/{id}?stream=true) until its
// caller gives it up: the gateway's follow of the response sees nothing new, as when the
// provider holds the response, for as long as the test needs and not for a set time.
// Everything else passes through. It starts shut.
type followGate struct {
	url  string
	mu   sync.Mutex
	open chan struct{}
	// opened says open is closed: reads pass.
	opened bool
}

func newFollowGate(t *testing.T, base string) *followGate {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	g := &followGate{open: make(chan struct{})}
	// The proxy keeps the path the gateway asks for, so the gate's URL carries the
	// provider's base path (/v1) and the held reads are recognised by their full path.
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy.FlushInterval = -1
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/responses/") && r.URL.Query().Get("stream") == "true" {
			select {
			case <-g.gate():
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(g.let)
	g.url = ts.URL + target.Path
	return g
}

// gate is closed while the gate is open.
func (g *followGate) gate() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// let opens the gate: held reads go on, and new ones pass. It may be called more than once.
func (g *followGate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened {
		close(g.open)
		g.opened = true
	}
}

// shut holds the reads that come from now on, until let.
func (g *followGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		g.open = make(chan struct{})
		g.opened = false
	}
}

// newFollowGatedWorld is an llmWorld set up as o says whose gateway reaches the provider
// through a followGate; w.base stays the provider's own address.
func newFollowGatedWorld(t *testing.T, o llmSetup) (*llmWorld, *followGate) {
	t.Helper()
	s, tw := newServer(t)
	w := &llmWorld{world: tw, db: tw.DB, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}}
	var base string
	w.fake, base = tw.LLM(fake.LLMOptions{Seed: 1, Latency: o.latency, ChunkDelay: o.chunkDelay})
	g := newFollowGate(t, base)
	w.base = g.url
	w.gw, w.url = w.gateway(t, s, o)
	w.base = base
	for _, name := range llmTenants {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	return w, g
}
