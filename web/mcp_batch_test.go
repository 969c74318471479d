package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/refund"
)

// TestMCPBatchCallsAreStampedLikeSingleOnes: a client on the 2025-03-26 protocol may send
// its tool calls as a JSON-RPC batch. Each call in it is recorded under its own JSON-RPC
// id, as a single call is, and the id a client writes into _meta itself never replaces it:
// the recorded client request names the call that made it (ops rule 8).
func TestMCPBatchCallsAreStampedLikeSingleOnes(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	body := `[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"issue_refund",` +
		`"arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"},"_meta":{"dev.settle/jsonrpc_id":"forged"}}},` +
		`{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"issue_refund",` +
		`"arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}}}]`
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"status":"`+refund.Refunded+`"`) {
		t.Fatalf("batch: %d %s", resp.StatusCode, answer)
	}
	rows, err := e.db.Pool.Query(context.Background(), `SELECT request_ref FROM client_requests ORDER BY request_ref`)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		refs = append(refs, r)
	}
	if strings.Join(refs, ",") != "mcp:b1,mcp:b2" {
		t.Fatalf("recorded request refs %q, want mcp:b1 and mcp:b2", refs)
	}
	if n := len(e.fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds at the fake, want 1", n)
	}
}
