package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// outageEnv is Settle wired as settle serve wires it (tokens cached for a few seconds, the
// refund API, the LLM gateway, the MCP server and the dashboard) on a database reached
// through a relay the test switches off and on: a Postgres that stops and comes back.
type outageEnv struct {
	world  *testworld.World
	relay  *pgtest.Relay
	url    string
	token  string
	stripe *fake.Stripe
	llm    *fake.LLM
	clock  *ops.ManualClock
	// afterStripe, when set, runs once Stripe answered a refund attempt and before the
	// ledger records the answer.
	afterStripe func()
	// afterLLM, when set, runs once the LLM provider answered and before the ledger records
	// the answer.
	afterLLM func()
	// gw is the LLM gateway, whose closes after an early answer Drain waits for.
	gw *llm.Gateway
}

func newOutageEnv(t *testing.T) *outageEnv {
	t.Helper()
	relay, dbURL := pgtest.NewBehindRelay(t)
	tw := testworld.On(t, dbURL)
	e := &outageEnv{world: tw, relay: relay, clock: ops.NewManualClock(time.Now())}
	s := tw.Server(e.clock)
	// As in settle serve: a token read once answers from memory for a while.
	s.Accounts = &web.TokenCache{Accounts: accounts(tw.DB), TTL: time.Hour, Clock: ops.SystemClock{}}
	ledger := ops.NewLedger(tw.DB, e.clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond

	var base string
	e.stripe, base = tw.Stripe(fake.StripeOptions{Seed: 1})
	for _, pi := range []string{"pi_4417", "pi_4418", "pi_4419"} {
		e.stripe.AddPaymentIntent(pi, 3800, "usd", fake.OwnedBy("shop"))
	}
	adapter := tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_outage", AttemptTimeout: 2 * time.Second})
	s.Refunds = &refund.Tool{Ledger: ledger, Store: tw.DB, Provider: hookedStripe{adapter, &e.afterStripe}, Deadline: 5 * time.Second}
	s.Operations = tw.DB
	s.RefundStatus = tw.DB

	e.llm, base = tw.LLM(fake.LLMOptions{Seed: 1})
	up := hookedLLM{tw.Upstream(base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"}), &e.afterLLM}
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: up, Prices: llm.DefaultPrices()})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM, e.gw = gw, gw
	s.JobsDeps = web.JobsDeps{Jobs: tw.Jobs()}
	e.url = tw.Serve(s.Handler())
	e.token = tw.Token(tw.Tenant("shop"), "outage")
	// The token is read once while the database answers, as a client's earlier calls would.
	if code, out, _ := e.do(t, http.MethodGet, "/api/v1/whoami", "", ""); code != http.StatusOK {
		t.Fatalf("whoami: %d %v", code, out)
	}
	return e
}

// hookedStripe is the Stripe adapter with a hook between Stripe's answer and its record.
type hookedStripe struct {
	*stripe.Adapter
	after *func()
}

func (h hookedStripe) Send(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
	res := h.Adapter.Send(ctx, op, a)
	if *h.after != nil {
		(*h.after)()
	}
	return res
}

// hookedLLM is the LLM adapter with a hook between the provider's answer and its record.
type hookedLLM struct {
	llm.Upstream
	after *func()
}

func (h hookedLLM) Send(ctx context.Context, c llm.Call) llm.Reply {
	r := h.Upstream.Send(ctx, c)
	if *h.after != nil {
		(*h.after)()
	}
	return r
}

// do sends a request with the tenant's token and returns the status, the decoded JSON body
// and the headers.
func (e *outageEnv) do(t *testing.T, method, path, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	return e.doWith(t, e.token, method, path, key, body)
}

func (e *outageEnv) doWith(t *testing.T, token, method, path, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		out = map[string]any{"body": string(b)}
	}
	return resp.StatusCode, out, resp.Header
}

// wantUnavailable checks an answer is a 503 problem with Retry-After of a few seconds, the
// code, and a detail that says each of says.
func wantUnavailable(t *testing.T, what string, code int, out map[string]any, h http.Header, wantCode string, says ...string) {
	t.Helper()
	if code != http.StatusServiceUnavailable {
		t.Fatalf("%s with the database down: %d %v; want 503", what, code, out)
	}
	if ra := h.Get("Retry-After"); ra == "" || ra == "0" || len(ra) > 2 {
		t.Errorf("%s: Retry-After %q; want a few seconds", what, ra)
	}
	if h.Get("Content-Type") != "application/problem+json" || out["code"] != wantCode {
		t.Errorf("%s: %s %v; want a problem with code %s", what, h.Get("Content-Type"), out, wantCode)
	}
	detail, _ := out["detail"].(string)
	for _, s := range says {
		if !strings.Contains(detail, s) {
			t.Errorf("%s: detail %q does not say %q", what, detail, s)
		}
	}
}

func refundJSON(order, pi string) string {
	return `{"order_id":"` + order + `","amount_cents":3800,"currency":"usd","payment_intent":"` + pi + `"}`
}

// With the database stopped, a refund, a chat completion, a job and a request whose token
// is not cached each answer 503 with Retry-After and say that this call sent nothing, so
// calling again with the same key is safe; nothing reached Stripe or the LLM provider
// (ops rule 12: "this call sent nothing" is what Settle knows, not "nothing was refunded").
func TestDatabaseOutageAnswers503NothingSent(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	fresh := e.world.Token(e.world.Tenant("shop"), "not yet read")
	e.relay.Off()

	code, out, h := e.do(t, http.MethodPost, "/api/v1/refunds", "", refundJSON("4417", "pi_4417"))
	wantUnavailable(t, "refund", code, out, h, ops.ReasonDatabaseUnavailable, "nothing", "same arguments")
	code, out, h = e.do(t, http.MethodPost, "/v1/chat/completions", "chat-1", chatBody("hello", 0, false))
	wantUnavailable(t, "chat completion", code, out, h, ops.ReasonDatabaseUnavailable, "nothing", "same Idempotency-Key")
	code, out, h = e.do(t, http.MethodPost, "/v1/chat/completions", "chat-2", chatBody("hello", 0, true))
	wantUnavailable(t, "streamed chat completion", code, out, h, ops.ReasonDatabaseUnavailable, "nothing", "same Idempotency-Key")
	code, out, h = e.do(t, http.MethodPost, "/api/v1/jobs", "job-1", jobJSON)
	wantUnavailable(t, "job", code, out, h, ops.ReasonDatabaseUnavailable, "nothing", "same Idempotency-Key")
	code, out, h = e.doWith(t, fresh, http.MethodPost, "/api/v1/refunds", "", refundJSON("4418", "pi_4418"))
	wantUnavailable(t, "refund with a token not cached", code, out, h, ops.ReasonDatabaseUnavailable, "nothing")

	if n := len(e.stripe.Refunds()); n != 0 {
		t.Errorf("Stripe holds %d refunds; the outage came before any send", n)
	}
	if n := len(e.llm.Generations()); n != 0 {
		t.Errorf("the provider generated %d completions; the outage came before any send", n)
	}

	// Back up: the same calls go through, each once.
	e.relay.On()
	code, out = retryWhileUnavailable(t, e, http.MethodPost, "/api/v1/refunds", "", refundJSON("4417", "pi_4417"))
	if code != http.StatusOK || out["status"] != refund.Refunded {
		t.Fatalf("refund once the database is back: %d %v", code, out)
	}
	code, out = retryWhileUnavailable(t, e, http.MethodPost, "/v1/chat/completions", "chat-1", chatBody("hello", 0, false))
	if code != http.StatusOK {
		t.Fatalf("chat completion once the database is back: %d %v", code, out)
	}
	if len(e.stripe.Refunds()) != 1 || len(e.llm.Generations()) != 1 {
		t.Fatalf("after the outage: %d refunds, %d generations; want one of each", len(e.stripe.Refunds()), len(e.llm.Generations()))
	}
}

// retryWhileUnavailable calls as a client that honours 503 and Retry-After does, for up to
// ten seconds: the first calls after the database came back may meet a connection the
// outage broke.
func retryWhileUnavailable(t *testing.T, e *outageEnv, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, out, _ := e.do(t, method, path, key, body)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, out
		}
	}
}

// The database stops after Stripe made the refund and before Settle recorded it: the
// client gets 503 with Retry-After saying the refund may have been made and that calling
// again with the same arguments settles it, never "failed" or "nothing was sent". Once the
// database is back and the operation's lease has run out, the same call resends it with
// its key and answers refunded with Stripe's one refund (ops rules 1, 3 and 12).
func TestDatabaseLostBetweenStripeAndItsRecord(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	var once sync.Once
	e.afterStripe = func() { once.Do(e.relay.Off) }

	code, out, h := e.do(t, http.MethodPost, "/api/v1/refunds", "", refundJSON("4419", "pi_4419"))
	wantUnavailable(t, "refund", code, out, h, ops.ReasonOutcomeUnrecorded, "may have", "same arguments", "never a second")
	detail, _ := out["detail"].(string)
	for _, wrong := range []string{"nothing was sent", "sent nothing", "stopped before"} {
		if strings.Contains(detail, wrong) {
			t.Errorf("detail %q says %q though Stripe ran the refund", detail, wrong)
		}
	}
	if n := len(e.stripe.Refunds()); n != 1 {
		t.Fatalf("Stripe holds %d refunds, want the one it made", n)
	}

	e.afterStripe = nil
	e.relay.On()
	e.clock.Advance(ops.DefaultLimits.Lease + time.Second)
	code, out = retryWhileUnavailable(t, e, http.MethodPost, "/api/v1/refunds", "", refundJSON("4419", "pi_4419"))
	refunds := e.stripe.Refunds()
	if code != http.StatusOK || out["status"] != refund.Refunded || len(refunds) != 1 || out["refund_id"] != refunds[0].ID {
		t.Fatalf("the same call once the database is back: %d %v, Stripe holds %v; want refunded with the one refund", code, out, refunds)
	}
}

// The database stops after the LLM provider answered and before Settle recorded it: the
// client has the provider's answer at once, since a whole success is answered before its
// close is written; the close then cannot be written, so the operation stays in progress
// with its attempt sent, never shown succeeded without it (ops rule 9), until its lease
// runs out and a lookup, the client's retry or the reaper settles it (ops rule 11). Nothing
// in the answer says it was recorded (ops rule 12).
func TestDatabaseLostBetweenTheLLMAndItsRecord(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	var once sync.Once
	e.afterLLM = func() { once.Do(e.relay.Off) }
	code, out, h := e.do(t, http.MethodPost, "/v1/chat/completions", "chat-lost", chatBody("hello", 0, false))
	gens := e.llm.Generations()
	if len(gens) != 1 {
		t.Fatalf("the provider generated %d completions, want 1", len(gens))
	}
	if code != http.StatusOK || out["id"] != gens[0].ID || h.Get("Settle-Operation-Id") == "" || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the client was answered %d %v %v; want the provider's completion %s", code, out, h, gens[0].ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.gw.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	e.relay.On()
	op := e.world.Operation(t, "chat-lost")
	if op.ID != h.Get("Settle-Operation-Id") || op.Status != ops.StatusInProgress {
		t.Fatalf("operation %s is %s after its close was lost, want %s in progress", op.ID, op.Status, h.Get("Settle-Operation-Id"))
	}
	if n := e.world.Count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND finished_at IS NULL`, op.ID); n != 1 {
		t.Fatalf("%d unfinished attempts, want the one sent", n)
	}
}

// Over MCP, with the database stopped, issue_refund answers a tool error that tells the
// agent nothing was sent and to call again with the same arguments in a few seconds; a
// request whose token cannot be read answers 503 with Retry-After.
func TestDatabaseOutageMCPToolSaysNothingSent(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "support-agent", Version: "test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{e.token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	fresh := e.world.Token(e.world.Tenant("shop"), "not yet read")
	e.relay.Off()

	res, _, text := call(t, cs, "issue_refund", map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd",
		"payment_intent": "pi_4417"}, mcp.Meta{"tool_call_id": "toolu_outage"})
	if !res.IsError {
		t.Fatalf("issue_refund with the database down answered %q; want a tool error", text)
	}
	for _, want := range []string{"database", "sent nothing", "same arguments", "5 seconds"} {
		if !strings.Contains(text, want) {
			t.Errorf("tool error %q does not say %q", text, want)
		}
	}
	if n := len(e.stripe.Refunds()); n != 0 {
		t.Errorf("Stripe holds %d refunds", n)
	}
	// A call refused for its arguments cannot be recorded either: the agent is told to wait
	// and call again, not to fix an argument (ops rule 8).
	res, _, text = call(t, cs, "issue_refund", map[string]any{"order_id": "4418", "currency": "usd",
		"payment_intent": "pi_4418"}, mcp.Meta{"tool_call_id": "toolu_outage_invalid"})
	if !res.IsError || !strings.Contains(text, "5 seconds") || strings.Contains(text, "refused the arguments") {
		t.Errorf("issue_refund without an amount, the database down: %q; want the outage, not the refusal", text)
	}

	code, out, h := e.doWith(t, fresh, http.MethodPost, "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	wantUnavailable(t, "MCP request with a token not cached", code, out, h, ops.ReasonDatabaseUnavailable)
}

// A person signed in to the dashboard gets a 503 page with Retry-After while the database
// is stopped, not a 500.
func TestDatabaseOutageDashboardPageIs503(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	if _, err := accounts(e.world.DB).CreateUser(context.Background(), "oncall@example.com", password, desk.RoleOncall); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	resp, err := c.PostForm(e.url+"/login", url.Values{"email": {"oncall@example.com"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	e.relay.Off()
	resp, err = c.Get(e.url + "/ops")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET /ops with the database down: %d Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(body), "database") {
		t.Errorf("the page does not say the database cannot be reached:\n%s", body)
	}
}

// A request refused while the database is down cannot be recorded, and ops rule 8 wants
// every client request recorded, the refused ones too: the refusal is not answered as if it
// were (a 400 the client would not send again), but as the outage it met, 503 with
// Retry-After, so that the client's next try is both answered and recorded.
func TestDatabaseOutageRefusalIsNotAnsweredUnrecorded(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	e.relay.Off()
	code, out, h := e.do(t, http.MethodPost, "/v1/chat/completions", "chat-bad", `{"model":`)
	wantUnavailable(t, "malformed chat completion", code, out, h, ops.ReasonDatabaseUnavailable)
	code, out, h = e.do(t, http.MethodPost, "/api/v1/refunds", "", `{"order_id":"4419","currency":"usd","payment_intent":"pi_4419"}`)
	wantUnavailable(t, "refund without an amount", code, out, h, ops.ReasonDatabaseUnavailable)

	e.relay.On()
	code, out = retryWhileUnavailable(t, e, http.MethodPost, "/v1/chat/completions", "chat-bad", `{"model":`)
	if code != http.StatusBadRequest {
		t.Fatalf("the malformed request once the database is back: %d %v; want 400", code, out)
	}
}

// A job request Settle would refuse is answered as the outage while the database is down,
// as the other routes' refusals are: its refusal cannot be recorded, and every client
// request is (ops rule 8), so its client is told to send it again rather than to fix it.
func TestDatabaseOutageJobRefusalIsNotAnsweredUnrecorded(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	e.relay.Off()
	code, out, h := e.do(t, http.MethodPost, "/api/v1/jobs", "job-bad", `{"document":`)
	wantUnavailable(t, "malformed job", code, out, h, ops.ReasonDatabaseUnavailable)
	code, out, h = e.do(t, http.MethodPost, "/api/v1/jobs", "job-huge", `{"document":{"text":"a parcel"},"pipeline":"summarise","prompt_version":"v1","model_profile":"huge"}`)
	wantUnavailable(t, "job of an unknown profile", code, out, h, ops.ReasonDatabaseUnavailable)

	e.relay.On()
	code, out = retryWhileUnavailable(t, e, http.MethodPost, "/api/v1/jobs", "job-bad", `{"document":`)
	if code != http.StatusBadRequest {
		t.Fatalf("the malformed job once the database is back: %d %v; want 400", code, out)
	}
}
