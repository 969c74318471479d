package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// holdMarker, in a prompt, makes holdGate hold the call.
const holdMarker = "hold this call"

// holdGate stands between the gateway and the fake LLM and holds every call whose body holds
// holdMarker until it is opened, and passes every other on at once: one tenant's long calls
// stay in flight while another tenant's are answered. It counts the calls that reached it.
type holdGate struct {
	url     string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
	posts   atomic.Int32
}

func newHoldGate(t *testing.T, base string) *holdGate {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	g := &holdGate{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			g.posts.Add(1)
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(holdMarker)) {
				g.arrived <- struct{}{}
				select {
				case <-g.release:
				case <-r.Context().Done():
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	g.url = ts.URL
	return g
}

// open lets every held call, and every later one, go on.
func (g *holdGate) open() { g.once.Do(func() { close(g.release) }) }

// shareWorld is a server whose API serves every paid route for real (the gateway before the
// fake LLM behind a holdGate, refunds on the fake Stripe, jobs, MCP), with tokens of two
// tenants: shop, which holds calls, and bank, which must still be served.
type shareWorld struct {
	tw     *testworld.World
	server *web.Server
	url    string
	gate   *holdGate
	stripe *fake.Stripe
	tokens map[string]string
}

func newShareWorld(t *testing.T, max, perTenant int) *shareWorld {
	t.Helper()
	s, tw := newServer(t)
	s.Clock = ops.SystemClock{}
	ledger := ops.NewLedger(tw.DB, ops.SystemClock{})
	_, base := tw.LLM(fake.LLMOptions{Seed: 1})
	w := &shareWorld{tw: tw, server: s, gate: newHoldGate(t, base), tokens: map[string]string{}}
	up := tw.Upstream(w.gate.url, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: tw.DB, Streams: tw.DB})
	if err != nil {
		t.Fatal(err)
	}
	var sbase string
	w.stripe, sbase = tw.Stripe(fake.StripeOptions{Seed: 1})
	for _, owner := range []string{"shop", "bank"} {
		w.stripe.AddPaymentIntent("pi_"+owner, 3800, "usd", fake.OwnedBy(owner))
	}
	adapter := tw.StripeAdapter(sbase, stripe.Config{APIKey: "sk_test_share", AttemptTimeout: time.Second})
	s.Refunds = &refund.Tool{Ledger: ledger, Store: tw.DB, Provider: adapter, Deadline: 3 * time.Second}
	s.Operations, s.RefundStatus, s.LLM = tw.DB, tw.DB, gw
	s.JobsDeps = web.JobsDeps{Jobs: tw.Jobs()}
	s.MaxInFlight, s.MaxInFlightPerTenant = max, perTenant
	w.url = tw.Serve(s.Handler())
	// Cleanups run last first: the held calls go on before the servers close and wait for them.
	t.Cleanup(w.gate.open)
	for _, name := range []string{"shop", "bank"} {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	return w
}

// do sends body to path as tenant, with the headers given as name, value pairs, and returns
// the answer with its body read.
func (w *shareWorld) do(t *testing.T, tenant, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// hold sends n chat completions of tenant that the gate holds, and waits until each is
// either held at the provider or answered; it returns how many are held and the statuses
// of those answered at once. The held ones report their status on done once the gate opens.
func (w *shareWorld) hold(t *testing.T, tenant string, n int, done chan<- int) (held int, answered []int) {
	t.Helper()
	early := make(chan int, n)
	for i := range n {
		go func() {
			resp, err := w.sendHeld(tenant, fmt.Sprintf("held-%s-%d", tenant, i))
			st := 0
			if err == nil {
				st = resp.StatusCode
			}
			// A call answered 429 never reached the provider; any other was held there.
			if st == http.StatusTooManyRequests {
				early <- st
				return
			}
			done <- st
		}()
	}
	for deadline := time.After(10 * time.Second); held+len(answered) < n; {
		select {
		case <-w.gate.arrived:
			held++
		case st := <-early:
			answered = append(answered, st)
		case <-deadline:
			t.Fatalf("of %d held calls of %s, %d reached the provider and %d were answered", n, tenant, held, len(answered))
		}
	}
	return held, answered
}

// sendHeld sends a chat completion the gate holds, on plain net/http (no client library
// retries behind the test's back).
func (w *shareWorld) sendHeld(tenant, key string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(chatBody(holdMarker, 0, false)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// wantServed checks that tenant's requests on every paid route are answered as usual: a chat
// completion, a refund, a job and an MCP tool call.
func (w *shareWorld) wantServed(t *testing.T, tenant, when string) {
	t.Helper()
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", chatBody("a short question", 0, false), http.StatusOK},
		{"/api/v1/refunds", `{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_` + tenant + `"}`, http.StatusOK},
		{"/api/v1/jobs", jobJSON, http.StatusAccepted},
		{"/mcp", `{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"refund_status","arguments":{"operation_id":"op_none"}}}`, http.StatusOK},
	} {
		resp, body := w.do(t, tenant, http.MethodPost, c.path, c.body, "Idempotency-Key", "served-"+tenant+"-"+c.path, "Mcp-Protocol-Version", "2025-03-26")
		if resp.StatusCode != c.status {
			t.Errorf("%s's POST %s %s: %d %.300s, want %d", tenant, c.path, when, resp.StatusCode, body, c.status)
		}
	}
}

// TestOneTenantCannotTakeEveryPlaceInFlight: one tenant's slow calls (long LLM generations,
// held at the provider) used to take every place of the replica's in-flight cap, and every
// other tenant's requests were then shed with 503 before their token was read. A tenant
// holds at most its share of the places: its calls beyond it are refused with 429 and
// recorded as its client requests (ops rule 8), and another tenant's requests on every paid
// route (the gateway, refunds, jobs, MCP) are still served.
func TestOneTenantCannotTakeEveryPlaceInFlight(t *testing.T) {
	t.Parallel()
	const max, share = 4, 2
	w := newShareWorld(t, max, share)
	done := make(chan int, max)
	held, answered := w.hold(t, "shop", max, done)

	w.wantServed(t, "bank", "while shop's calls wait on the provider")
	if held != share || len(answered) != max-share {
		t.Fatalf("shop sent %d slow calls with a share of %d: %d held, %d answered at once", max, share, held, len(answered))
	}
	for _, st := range answered {
		if st != http.StatusTooManyRequests {
			t.Errorf("a call of shop beyond its share answered %d, want 429", st)
		}
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM client_requests c JOIN tenants t ON t.id = c.tenant_id
WHERE t.name = 'shop' AND c.kind = 'llm_call' AND c.answer = 'rejected'`); n != max-share {
		t.Errorf("shop's calls refused beyond its share recorded as %d rejected client requests, want %d", n, max-share)
	}
	w.gate.open()
	for range share {
		if st := <-done; st != http.StatusOK {
			t.Errorf("a held call of shop ended with %d", st)
		}
	}
}

// shareRefused is a request of a tenant beyond its share: where it is sent, and the kind and
// request_ref it is recorded under ("" kind: a read, which no route records).
type shareRefused struct {
	method, path, route, body string
	kind, ref                 string
}

var beyondShare = []shareRefused{
	{http.MethodPost, "/v1/chat/completions", "/v1/chat/completions", chatBody("more", 0, false), "llm_call", "r-chat"},
	{http.MethodPost, "/v1/embeddings", "/v1/embeddings", `{"model":"fake-embed","input":"more"}`, "llm_call", "r-embed"},
	{http.MethodPost, "/v1/responses", "/v1/responses", `{"model":"fake-small","input":"more"}`, "llm_call", "r-responses"},
	{http.MethodPost, "/v1/messages", "/v1/messages", `{"model":"fake-small","max_tokens":10,"messages":[]}`, "llm_call", "r-messages"},
	{http.MethodPost, "/api/v1/refunds", "/api/v1/refunds", `{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_shop"}`, "refund", "r-refund"},
	{http.MethodPost, "/api/v1/jobs", "/api/v1/jobs", jobJSON, "llm_job", "r-job"},
	{http.MethodPost, "/mcp", "/mcp", `{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":{"name":"issue_refund",` +
		`"arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_shop"}}}`, "refund", "mcp:m1"},
	{http.MethodPost, "/v1/responses/resp_held/cancel", "/v1/responses/{id}/cancel", "", "llm_call", "r-cancel"},
	{http.MethodGet, "/api/v1/operations/op_none", "/api/v1/operations/{id}", "", "", ""},
}

// TestATenantBeyondItsShareIsRefusedOnEveryPaidRoute: with its share of the places in flight
// taken by its own slow calls, a tenant's next request on any API route (the gateway's four,
// a cancel of a response, refunds, jobs, MCP, a read) is answered at once with 429, code
// tenant_busy (Anthropic's
// rate_limit_error on /v1/messages) and Retry-After: 1, and nothing of it is sent: no
// operation, no provider call, no refund, no job. Each paid request is recorded as that
// tenant's rejected client request of its kind, under its request reference (ops rule 8: it
// named its tenant), and counted by route and tenant in
// settle_http_tenant_share_refused_total, never as shed. Another tenant is served meanwhile,
// and once the held calls end the tenant is served again.
func TestATenantBeyondItsShareIsRefusedOnEveryPaidRoute(t *testing.T) {
	t.Parallel()
	const max, share = 4, 2
	w := newShareWorld(t, max, share)
	done := make(chan int, max)
	if held, answered := w.hold(t, "shop", share, done); held != share || len(answered) != 0 {
		t.Fatalf("shop's %d slow calls: %d held, %d answered at once", share, held, len(answered))
	}
	posts := w.gate.posts.Load()
	for _, c := range beyondShare {
		resp, body := w.do(t, "shop", c.method, c.path, c.body, "Idempotency-Key", "beyond-"+c.path, "X-Request-Ref", c.ref,
			"Mcp-Protocol-Version", "2025-03-26")
		wantTenantBusy(t, c.method+" "+c.path, resp, body)
		got := metric(t, w.server.Registry, "settle_http_tenant_share_refused_total", map[string]string{"route": c.route, "tenant": "shop"})
		if got != 1 {
			t.Errorf("settle_http_tenant_share_refused_total{route=%q,tenant=shop}: %v, want 1", c.route, got)
		}
	}
	w.wantNothingSent(t, posts, share)
	w.wantRecorded(t, "shop")
	if got := metric(t, w.server.Registry, "settle_http_shed_total", nil); got != 0 {
		t.Errorf("settle_http_shed_total: %v, want 0: a tenant over its share is not shed", got)
	}
	w.wantServed(t, "bank", "while shop is at its share")

	w.gate.open()
	for range share {
		if st := <-done; st != http.StatusOK {
			t.Errorf("a held call of shop ended with %d", st)
		}
	}
	if resp, body := w.do(t, "shop", http.MethodPost, "/v1/chat/completions", chatBody("again", 0, false), "Idempotency-Key", "after"); resp.StatusCode != http.StatusOK {
		t.Errorf("shop's call once its held calls ended: %d %s", resp.StatusCode, body)
	}
}

// wantTenantBusy checks a refusal for a tenant beyond its share: 429 with Retry-After: 1, as
// problem+json with code tenant_busy, or on /v1/messages as Anthropic's rate_limit_error
// carrying that code.
func wantTenantBusy(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("%s beyond the tenant's share: %d, Retry-After %q, %.300s; want 429 and 1", what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		return
	}
	want := `"code":"` + web.ReasonTenantBusy + `"`
	if strings.HasSuffix(what, "/v1/messages") {
		want = `"type":"rate_limit_error"`
	} else if resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s beyond the tenant's share: Content-Type %q, want problem+json", what, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, want) || !strings.Contains(body, web.ReasonTenantBusy) {
		t.Errorf("%s beyond the tenant's share answered %s, want %s and code %s", what, body, want, web.ReasonTenantBusy)
	}
}

// wantNothingSent checks that the refused requests reached no provider and opened nothing:
// the gate saw no call beyond posts, the held calls' operations are the only ones, and there
// is no refund and no job.
func (w *shareWorld) wantNothingSent(t *testing.T, posts int32, operations int) {
	t.Helper()
	if n := w.gate.posts.Load(); n != posts {
		t.Errorf("refused requests reached the LLM provider: %d calls, want %d", n, posts)
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM operations`); n != operations {
		t.Errorf("%d operations, want the %d held calls' only", n, operations)
	}
	if n := len(w.stripe.Refunds()); n != 0 {
		t.Errorf("a refused refund reached Stripe: %d refunds", n)
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("a refused job was submitted: %d jobs", n)
	}
}

// wantRecorded checks that each paid request of beyondShare is recorded once as tenant's
// rejected client request of its kind (a cancel as a refused cancel), under its reference,
// and the reads not at all.
func (w *shareWorld) wantRecorded(t *testing.T, tenant string) {
	t.Helper()
	rows, err := w.tw.DB.Pool.Query(context.Background(), `SELECT c.kind || ' ' || c.request_ref FROM client_requests c
JOIN tenants t ON t.id = c.tenant_id WHERE t.name = $1 AND c.answer IN ('rejected', 'cancel_refused') ORDER BY 1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got[s]++
	}
	want := map[string]int{}
	for _, c := range beyondShare {
		if c.kind != "" {
			want[c.kind+" "+c.ref]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s's rejected client requests: %v, want %v", tenant, got, want)
	}
}
