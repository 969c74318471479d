package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/refund"
)

// postMCP sends one raw body to /mcp with the tenant's token and the protocol version
// given, as a client that does not use the SDK would, and returns the status and answer.
func (e *mcpEnv) postMCP(t *testing.T, version string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// refusedRefs lists the request refs of the tenant's refused refund requests, in order.
func (e *mcpEnv) refusedRefs(t *testing.T) []string {
	t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT request_ref FROM client_requests
		WHERE tenant_id = $1 AND kind = 'refund' AND answer = 'rejected' AND operation_id IS NULL ORDER BY id`, e.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var refs []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	return refs
}

// rpcError is the error of a JSON-RPC answer, empty when it has none.
func rpcError(t *testing.T, answer string) string {
	t.Helper()
	var m struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(answer), &m); err != nil || m.Error == nil {
		return ""
	}
	return m.Error.Message
}

// TestMCPUnknownToolIsRecordedAsARefusedRequest: a tools/call of a tool the server does not
// have never reaches a tool, yet it is a request of the tenant its token names: it is
// recorded once, as a refused refund request (the only kind this server's tools open) under
// the model's tool call id, and answered with an error naming the tools there are. The
// protocol's own messages (initialize, tools/list, ping, notifications) are no request for
// a paid side effect and stay unrecorded. ops rule 8.
func TestMCPUnknownToolIsRecordedAsARefusedRequest(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/list"}`,
	} {
		e.postMCP(t, "2025-06-18", strings.NewReader(msg))
	}
	status, answer := e.postMCP(t, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call",`+
		`"params":{"name":"cancel_refund","arguments":{"order_id":"4417"},"_meta":{"tool_call_id":"toolu_unknown"}}}`))
	msg := rpcError(t, answer)
	if status != http.StatusOK || !strings.Contains(msg, `"cancel_refund"`) || !strings.Contains(msg, "issue_refund") ||
		!strings.Contains(msg, "This call sent nothing") {
		t.Fatalf("unknown tool: %d %s, want an error naming the tool and the tools there are", status, answer)
	}
	if refs := e.refusedRefs(t); len(refs) != 1 || refs[0] != "toolu_unknown" {
		t.Fatalf("refused requests recorded %q, want the unknown tool's call once", refs)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests`); n != 1 {
		t.Fatalf("%d client requests, want only the tool call", n)
	}
}

// TestMCPMalformedToolCallsAreRecorded: a tools/call the SDK cannot read (params that are
// no object, a name that is no string, no params, an id that is no id, no id at all, bytes
// cut short, a protocol version it does not speak) is
// refused before any tool runs; each names its tenant by its token, so each is recorded
// once as a refused refund request, under its JSON-RPC id where it has one, and answered
// with an error. ops rule 8.
func TestMCPMalformedToolCallsAreRecorded(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	bodies := []string{
		`{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":"issue_refund"}`,
		`{"jsonrpc":"2.0","id":"m2","method":"tools/call","params":{"name":42}}`,
		`{"jsonrpc":"2.0","id":"m3","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":{"n":4},"method":"tools/call","params":{"name":"issue_refund","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"issue_refund","arguments":{},"_meta":{"tool_call_id":"toolu_noid"}}}`,
		`{"jsonrpc":"2.0","id":"m6","method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"44`,
	}
	for _, b := range bodies {
		status, answer := e.postMCP(t, "2025-06-18", strings.NewReader(b))
		if status == http.StatusOK && rpcError(t, answer) == "" {
			t.Errorf("%s: answered %d %s, want a refusal", b, status, answer)
		}
	}
	// A protocol version the SDK does not speak refuses the whole request, and its call.
	status, answer := e.postMCP(t, "1999-01-01", strings.NewReader(`{"jsonrpc":"2.0","id":"m7","method":"tools/call",`+
		`"params":{"name":"issue_refund","arguments":{}}}`))
	if status != http.StatusBadRequest || !strings.Contains(rpcError(t, answer), "protocol version") {
		t.Errorf("unknown protocol version: %d %s, want 400 with a JSON-RPC error", status, answer)
	}
	want := "mcp:m1,mcp:m2,mcp:m3,,toolu_noid,mcp:m6,mcp:m7"
	if refs := e.refusedRefs(t); strings.Join(refs, ",") != want {
		t.Fatalf("refused requests recorded %q, want %q", refs, want)
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 || len(e.fake.Refunds()) != 0 {
		t.Fatalf("a malformed call opened %d operations", n)
	}
}

// bigCall is a reader of a tools/call whose arguments run to size bytes, made as it is read.
type bigCall struct {
	head, tail string
	size, off  int
}

func (b *bigCall) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && b.off < b.size {
		switch {
		case b.off < len(b.head):
			p[n] = b.head[b.off]
		case b.off >= b.size-len(b.tail):
			p[n] = b.tail[b.off-(b.size-len(b.tail))]
		default:
			p[n] = 'x'
		}
		n++
		b.off++
	}
	return n, nil
}

// TestMCPToolCallOverTheSizeLimitIsRecorded: a tools/call over the body limit (4 MiB) is
// refused before anything reads its arguments; it is still its tenant's request and is
// recorded once, and answered 413 with a JSON-RPC error that says so. ops rule 8.
func TestMCPToolCallOverTheSizeLimitIsRecorded(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	// A little over the limit: the server drains what it leaves unread, so the client reads
	// the answer instead of a reset connection.
	body := &bigCall{head: `{"jsonrpc":"2.0","id":"big1","method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"`,
		tail: `"}}}`, size: 4<<20 + 32<<10}
	status, answer := e.postMCP(t, "2025-06-18", body)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(rpcError(t, answer), "4194304 bytes") {
		t.Fatalf("too large: %d %s, want 413 with a JSON-RPC error naming the limit", status, answer)
	}
	if refs := e.refusedRefs(t); strings.Join(refs, ",") != "mcp:big1" {
		t.Fatalf("refused requests recorded %q, want the call once", refs)
	}
	// A body over the limit that is no tool call is refused and not recorded.
	status, _ = e.postMCP(t, "2025-06-18", &bigCall{head: `{"jsonrpc":"2.0","id":"big2","method":"ping","params":{"x":"`, tail: `"}}`, size: 4<<20 + 32<<10})
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a large ping answered %d", status)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests`); n != 1 {
		t.Fatalf("%d client requests, want the tool call only", n)
	}
}

// TestMCPRefusedCallsOfABatchAreRecorded: in a batch (protocol 2025-03-26), a call of an
// unknown tool is recorded as refused beside the call that refunds; on a protocol that
// refuses batches (2025-06-18) every tool call of the refused batch is recorded as refused
// and nothing is refunded. ops rule 8.
func TestMCPRefusedCallsOfABatchAreRecorded(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	batch := func(a, b string) string {
		return `[{"jsonrpc":"2.0","id":"` + a + `","method":"tools/call","params":{"name":"issue_refund",` +
			`"arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}}},` +
			`{"jsonrpc":"2.0","id":"` + b + `","method":"tools/call","params":{"name":"void_payment","arguments":{}}},` +
			`{"jsonrpc":"2.0","id":"p","method":"ping"}]`
	}
	status, answer := e.postMCP(t, "2025-06-18", strings.NewReader(batch("n1", "n2")))
	if status == http.StatusOK || len(e.fake.Refunds()) != 0 {
		t.Fatalf("batch on 2025-06-18: %d %s", status, answer)
	}
	if refs := e.refusedRefs(t); strings.Join(refs, ",") != "mcp:n1,mcp:n2" {
		t.Fatalf("refused batch: recorded %q, want both tool calls", refs)
	}
	status, answer = e.postMCP(t, "2025-03-26", strings.NewReader(batch("o1", "o2")))
	if status != http.StatusOK || !strings.Contains(answer, `"status":"`+refund.Refunded+`"`) || !strings.Contains(answer, `no tool \"void_payment\"`) {
		t.Fatalf("batch on 2025-03-26: %d %s", status, answer)
	}
	if refs := e.refusedRefs(t); strings.Join(refs, ",") != "mcp:n1,mcp:n2,mcp:o2" {
		t.Fatalf("recorded %q, want the unknown tool's call o2 refused too", refs)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'mcp:o1' AND operation_id IS NOT NULL`); n != 1 {
		t.Fatalf("the refund of the batch recorded %d times", n)
	}
}

// TestMCPRefusedCallDuringAnOutageSaysSo: a tool call the SDK refuses while the database is
// down cannot be recorded, so its answer is the outage (wait and call again), never the
// refusal's "fix the call"; a body over the limit is then a 503, not a 413. ops rule 8.
func TestMCPRefusedCallDuringAnOutageSaysSo(t *testing.T) {
	t.Parallel()
	o := newOutageEnv(t)
	e := &mcpEnv{url: o.url, token: o.token}
	// The token is read once, so the outage meets the recording, not the token.
	if status, answer := e.postMCP(t, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", status, answer)
	}
	o.relay.Off()
	status, answer := e.postMCP(t, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call",`+
		`"params":{"name":"cancel_refund","arguments":{}}}`))
	msg := rpcError(t, answer)
	if !strings.Contains(msg, "5 seconds") || strings.Contains(msg, "fix the call") {
		t.Fatalf("unknown tool, the database down: %d %s, want the outage, not the refusal", status, answer)
	}
	status, answer = e.postMCP(t, "2025-06-18", &bigCall{head: `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"`,
		tail: `"}}}`, size: 4<<20 + 32<<10})
	if status != http.StatusServiceUnavailable || !strings.Contains(rpcError(t, answer), "5 seconds") {
		t.Fatalf("too large, the database down: %d %.300s, want 503 with the outage", status, answer)
	}
}
