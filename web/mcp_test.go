package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// mcpEnv is the MCP server wired for real: Postgres, stripe-go, the fake Stripe over
// loopback, and an agent connecting with the SDK's own client.
type mcpEnv struct {
	db     *pg.DB
	url    string
	token  string
	fake   *fake.Stripe
	tenant *ops.Tenant
	// ledger is the refund tool's: a test may set its limits before the first call.
	ledger *ops.Ledger
}

// newMCPEnv wires the env; each of with may set the server's limits before it serves.
func newMCPEnv(t *testing.T, attemptTimeout, deadline time.Duration, with ...func(*web.Server)) *mcpEnv {
	t.Helper()
	s, tw := newServer(t)
	for _, f := range with {
		f(s)
	}
	db := tw.DB
	fk, base := tw.Stripe(fake.StripeOptions{Seed: 1})
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	adapter := tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_mcp", AttemptTimeout: attemptTimeout})
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	s.Clock = ops.SystemClock{}
	s.Refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: adapter, Deadline: deadline}
	s.Operations = db
	s.RefundStatus = db
	tenant := tw.Tenant("shop")
	return &mcpEnv{db: db, url: tw.Serve(s.Handler()), token: tw.Token(tenant, "agent"), fake: fk, tenant: tenant, ledger: ledger}
}

// bearer adds the tenant token to every request of the MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func (e *mcpEnv) connect(t *testing.T, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "support-agent", Version: "test"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
}

func (e *mcpEnv) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cs, err := e.connect(t, e.token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (e *mcpEnv) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// call calls a tool and returns the result, its structured answer and its text.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, mcptool.Answer, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	ans, text := testworld.ToolResult(t, tool, res)
	return res, ans, text
}

func storyArgs() map[string]any {
	return map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417",
		"reason": "requested_by_customer"}
}

// The refund agent's timeout then try again, over MCP: toolu_01 times out while Stripe
// commits the refund; the customer says "try again"; toolu_02 reuses the operation's key and
// gets the refund the first one made.
func TestMCPIssueRefundTwiceAcrossTimeoutRefundsOnce(t *testing.T) {
	t.Parallel()
	// Each call makes one attempt, as when the agent's own tool call times out with it. The
	// call's deadline leaves the payment check and the insert all the time a busy machine
	// takes: a deadline one attempt long (a second) ran out during them, before the refund
	// was sent, and toolu_01 answered that nothing was sent. Stripe holds its answer to the
	// first request longer than the attempt waits.
	e := newMCPEnv(t, 2*time.Second, 30*time.Second)
	e.ledger.Limits.AttemptsPerCall = 1
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 5 * time.Second})
	cs := e.session(t)

	res, first, text := call(t, cs, "issue_refund", storyArgs(), mcp.Meta{"tool_call_id": "toolu_01"})
	if res.IsError || first.Status != refund.Unconfirmed || first.OperationID == "" || first.CustomerMessage != mcptool.CustomerUnconfirmed {
		t.Fatalf("toolu_01 answered %+v (%s), want unconfirmed", first, text)
	}
	if !strings.HasPrefix(text, "unconfirmed") || !strings.Contains(text, "never refunds twice") || strings.Contains(text, "\n") {
		t.Fatalf("toolu_01 text %q: want one line saying calling again is safe", text)
	}
	// No wait for the first request to end at the fake: Stripe keeps the refund's answer
	// under the key from the moment it commits it, and the retry is answered from it.
	res, second, text := call(t, cs, "issue_refund", storyArgs(), mcp.Meta{"tool_call_id": "toolu_02"})
	refunds := e.fake.Refunds()
	if len(refunds) != 1 {
		t.Fatalf("the fake's ledger holds %d refunds, want 1", len(refunds))
	}
	if res.IsError || second.Status != refund.Refunded || second.OperationID != first.OperationID || second.RefundID != refunds[0].ID {
		t.Fatalf("toolu_02 answered %+v (%s), want refunded %s on %s", second, text, refunds[0].ID, first.OperationID)
	}
	if second.CustomerMessage != mcptool.CustomerRefunded || !strings.HasPrefix(text, "refunded") {
		t.Fatalf("toolu_02: customer message %q, text %q", second.CustomerMessage, text)
	}
	if n := e.count(t, `SELECT count(DISTINCT provider_key) FROM attempts`); n != 1 {
		t.Fatalf("%d provider keys used, want 1", n)
	}
	// Both tool calls are recorded under the model's tool call ids, the second as a duplicate.
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND request_ref = 'toolu_01' AND NOT duplicate`, first.OperationID); n != 1 {
		t.Fatalf("toolu_01 recorded %d times", n)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND request_ref = 'toolu_02' AND duplicate`, first.OperationID); n != 1 {
		t.Fatalf("toolu_02 recorded %d times as a duplicate", n)
	}
	// The model never sees the provider key.
	op, err := e.db.Get(context.Background(), first.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []mcptool.Answer{first, second} {
		b, _ := json.Marshal(a)
		if strings.Contains(string(b), op.ProviderKey) {
			t.Fatal("a tool answer shows the provider key")
		}
	}
}

func TestMCPRequestIDRecordedWithoutToolCallID(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	// A client may also try to forge the stamped id: the server's own stamp wins.
	_, ans, text := call(t, cs, "issue_refund", storyArgs(), mcp.Meta{mcptool.MetaRequestID: "forged"})
	if ans.Status != refund.Refunded {
		t.Fatalf("answered %+v (%s)", ans, text)
	}
	var ref string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT request_ref FROM client_requests WHERE operation_id = $1`, ans.OperationID).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "mcp:") || ref == "mcp:forged" || len(ref) < 5 {
		t.Fatalf("request_ref %q, want mcp: and the JSON-RPC id of the call", ref)
	}
}

func TestMCPConcurrentCallsOpenOneOperation(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, 2*time.Second, 5*time.Second)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 100 * time.Millisecond})
	const n = 10
	var wg sync.WaitGroup
	answers := make([]mcptool.Answer, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := e.connect(t, e.token)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: storyArgs(),
				Meta: mcp.Meta{"toolCallId": fmt.Sprintf("toolu_%02d", i)}})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %+v", i, err, res)
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &answers[i])
		}()
	}
	wg.Wait()
	opIDs := map[string]bool{}
	for i, a := range answers {
		if a.Status != refund.Refunded && a.Status != refund.Unconfirmed {
			t.Fatalf("call %d answered %+v", i, a)
		}
		opIDs[a.OperationID] = true
	}
	if len(opIDs) != 1 {
		t.Fatalf("%d operations, want 1", len(opIDs))
	}
	if got := len(e.fake.Refunds()); got != 1 {
		t.Fatalf("%d refunds at the fake, want 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM operations`); got != 1 {
		t.Fatalf("%d operations in the ledger, want 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM client_requests WHERE request_ref LIKE 'toolu_%'`); got != n {
		t.Fatalf("%d client requests recorded, want %d", got, n)
	}
}

func TestMCPBadArgumentsOpenNothing(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	with := func(k string, v any) map[string]any {
		a := storyArgs()
		if v == nil {
			delete(a, k)
		} else {
			a[k] = v
		}
		return a
	}
	cases := []struct {
		name string
		args map[string]any
		want string // what the error must name, so the model knows what to fix
	}{
		{"negative amount", with("amount_cents", -3800), "invalid_amount"},
		{"zero amount", with("amount_cents", 0), "amount_cents"},
		{"fractional amount", with("amount_cents", 38.5), "amount_cents"},
		{"amount as text", with("amount_cents", "38.00"), "amount_cents"},
		{"absurd amount", with("amount_cents", 1_000_000_000), "amount_cents"},
		{"missing amount", with("amount_cents", nil), "amount_cents is required"},
		{"missing order", with("order_id", nil), "order_id is required"},
		{"bad order", with("order_id", "4417; DROP TABLE"), "order_id"},
		{"unknown currency", with("currency", "zzz"), "invalid_currency"},
		{"bad payment intent", with("payment_intent", "ch_123"), "payment_intent"},
		{"bad reason", with("reason", "because"), "reason"},
		{"unknown argument", with("amount", 3800), `"amount"`},
		{"over remainder", with("amount_cents", 3900), "amount_over_remainder"},
	}
	for _, c := range cases {
		res, ans, text := call(t, cs, "issue_refund", c.args, mcp.Meta{"tool_call_id": "bad_" + strings.ReplaceAll(c.name, " ", "_")})
		if !res.IsError || ans.Status != "" {
			t.Errorf("%s: not refused: %+v %q", c.name, ans, text)
			continue
		}
		// Settle knows this call sent nothing, not that no refund exists for the order.
		if !strings.Contains(text, c.want) || !strings.Contains(text, "This call sent nothing") || strings.Contains(strings.ToLower(text), "nothing was refunded") {
			t.Errorf("%s: error %q does not name %q and say this call sent nothing", c.name, text, c.want)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened by bad arguments", n)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND request_ref LIKE 'bad_%'`); n != len(cases) {
		t.Fatalf("%d rejected tool calls recorded, want %d", n, len(cases))
	}
	if len(e.fake.Refunds()) != 0 {
		t.Fatal("a refused call refunded")
	}

	// A wrong or missing token is refused before any tool runs, as problem+json.
	for _, tok := range []string{"stl_nope", ""} {
		if cs, err := e.connect(t, tok); err == nil {
			cs.Close()
			t.Errorf("token %q: connected", tok)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_refund","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer stl_nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("bad token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened with a bad token", n)
	}
}

func TestMCPRefundStatus(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)

	// An operation Settle does not know: checking, and the sentence for the customer.
	res, ans, text := call(t, cs, "refund_status", map[string]any{"operation_id": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}, nil)
	if res.IsError || ans.Status != refund.Checking || ans.CustomerMessage != mcptool.CustomerChecking || !strings.Contains(text, mcptool.CustomerChecking) {
		t.Fatalf("unknown operation: %+v %q", ans, text)
	}
	res, ans, _ = call(t, cs, "refund_status", map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd"}, nil)
	if res.IsError || ans.Status != refund.Checking {
		t.Fatalf("unknown order: %+v", ans)
	}
	if res, _, text := call(t, cs, "refund_status", map[string]any{"operation_id": "op_5521"}, nil); !res.IsError || !strings.Contains(text, "operation_id") {
		t.Fatalf("malformed operation id: %q", text)
	}
	if res, _, text := call(t, cs, "refund_status", map[string]any{}, nil); !res.IsError || !strings.Contains(text, "operation_id") {
		t.Fatalf("no arguments: %q", text)
	}

	_, done, _ := call(t, cs, "issue_refund", storyArgs(), nil)
	if done.Status != refund.Refunded {
		t.Fatalf("refund: %+v", done)
	}
	for _, args := range []map[string]any{
		{"operation_id": done.OperationID},
		{"order_id": "4417", "amount_cents": 3800, "currency": "USD"},
	} {
		res, ans, text := call(t, cs, "refund_status", args, nil)
		if res.IsError || ans.Status != refund.Refunded || ans.OperationID != done.OperationID || ans.RefundID != done.RefundID {
			t.Fatalf("status %v: %+v %q", args, ans, text)
		}
	}
	// A status read is not a request for the refund: nothing more is recorded or sent.
	if n := e.count(t, `SELECT count(*) FROM client_requests`); n != 1 {
		t.Fatalf("%d client requests, want 1", n)
	}

	// Another tenant's token does not see it.
	other, _ := e.db.EnsureTenant(context.Background(), "other")
	tok, _ := e.db.CreateToken(context.Background(), other.ID, "t")
	ocs, err := e.connect(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer ocs.Close()
	if _, ans, _ := call(t, ocs, "refund_status", map[string]any{"operation_id": done.OperationID}, nil); ans.Status != refund.Checking || ans.RefundID != "" {
		t.Fatalf("another tenant sees %+v", ans)
	}
}

func TestMCPToolsDescribeTheTruthAndTheLimits(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		tools[tl.Name] = tl
	}
	issue, status := tools["issue_refund"], tools["refund_status"]
	if issue == nil || status == nil || len(tools) != 2 {
		t.Fatalf("tools: %v", tools)
	}
	for _, want := range []string{`"unconfirmed"`, `"checking"`, "NEVER refunds", "Do NOT say it succeeded or failed", "safe to call issue_refund again"} {
		if !strings.Contains(issue.Description, want) {
			t.Errorf("issue_refund's description lacks %q", want)
		}
	}
	schema, _ := json.Marshal(issue.InputSchema)
	for _, want := range []string{`"minimum":1`, `"maximum":100000000`, `"pattern":"^pi_`, `"required":["order_id","amount_cents","currency","payment_intent"]`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("issue_refund's input schema lacks %s: %s", want, schema)
		}
	}
	if issue.OutputSchema == nil || status.OutputSchema == nil {
		t.Error("the tools declare no output schema")
	}
}

// TestMCPTryAgainWithAnotherReasonStaysTruthful: the first refund got a saved 500 from
// Stripe, so its outcome is unknown; the agent tries again with another reason. The
// answer is the first operation's status, with a note that the other argument was not
// used, never a refusal that reads as "nothing was refunded".
// ops rule 12: the answer never says more than Settle knows.
func TestMCPTryAgainWithAnotherReasonStaysTruthful(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultServerError})
	cs := e.session(t)
	_, first, text := call(t, cs, "issue_refund", storyArgs(), mcp.Meta{"tool_call_id": "toolu_01"})
	if first.Status != refund.Checking {
		t.Fatalf("first call: %+v %q, want checking", first, text)
	}
	args := storyArgs()
	args["reason"] = "duplicate"
	res, again, text := call(t, cs, "issue_refund", args, mcp.Meta{"tool_call_id": "toolu_02"})
	if res.IsError || again.Status != refund.Checking || again.OperationID != first.OperationID ||
		again.CustomerMessage != mcptool.CustomerChecking || !strings.Contains(again.Note, "other parameters were not used") {
		t.Fatalf("try again with another reason: %+v %q", again, text)
	}
	if strings.Contains(strings.ToLower(text), "nothing was refunded") {
		t.Fatalf("the tool says nothing was refunded while the first refund may have gone through: %q", text)
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 1 {
		t.Fatalf("%d operations, want 1", n)
	}
}

// TestMCPRefundsOnlyTheTenantsOwnPayments: the agent's tool is held to the same ownership
// as the API: another tenant's payment is refused as unknown, and nothing is sent.
func TestMCPRefundsOnlyTheTenantsOwnPayments(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	e.fake.AddPaymentIntent("pi_bank", 3800, "usd", fake.OwnedBy("bank"))
	cs := e.session(t)
	args := storyArgs()
	args["payment_intent"] = "pi_bank"
	res, _, text := call(t, cs, "issue_refund", args, mcp.Meta{"tool_call_id": "toolu_foreign"})
	if !res.IsError || !strings.Contains(text, "unknown_payment") || !strings.Contains(text, "This call sent nothing") {
		t.Fatalf("foreign payment: %q", text)
	}
	if len(e.fake.Refunds()) != 0 {
		t.Fatal("a foreign payment was refunded")
	}
}
