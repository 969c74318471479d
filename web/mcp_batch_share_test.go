package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/web"
)

// batchOf is a JSON-RPC batch of n issue_refund calls, ids b0…, each refunding 1.00 of
// pi_4417 for its own order, so each is an intent of its own.
func batchOf(n int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d","method":"tools/call","params":{"name":"issue_refund",`+
			`"arguments":{"order_id":"b%d","amount_cents":100,"currency":"usd","payment_intent":"pi_4417"}}}`, i, i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// TestMCPBatchCallsEachTakeAPlaceInTheTenantsShare: a client on the 2025-03-26 protocol
// sends ten issue_refund calls in one JSON-RPC batch. The SDK runs a batch's calls at once,
// so the one HTTP request would hold ten refunds in flight on one place of its tenant's
// share. Each call takes a place: a batch with more calls than the share has left is
// refused whole with 429 tenant_busy, nothing is sent, and each of its calls is recorded as
// the tenant's refused request under its own id; a batch that fits runs.
// ops rule 8: every client request is recorded, refused ones with their reason.
func TestMCPBatchCallsEachTakeAPlaceInTheTenantsShare(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 5*time.Second, func(s *web.Server) { s.MaxInFlightPerTenant = 4 })
	code, answer := e.postMCP(t, "2025-03-26", strings.NewReader(batchOf(10)))
	if code != 429 || !strings.Contains(answer, "tenant_busy") {
		t.Fatalf("a batch of 10 calls on a share of 4: %d %.300s, want 429 tenant_busy", code, answer)
	}
	if n := len(e.fake.Refunds()); n != 0 {
		t.Fatalf("the refused batch made %d refunds", n)
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("the refused batch opened %d operations", n)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND reason = 'tenant_busy' AND request_ref LIKE 'mcp:b%'`); n != 10 {
		t.Fatalf("%d of the batch's 10 calls recorded as refused tenant_busy", n)
	}
	code, answer = e.postMCP(t, "2025-03-26", strings.NewReader(batchOf(4)))
	if code != 200 || strings.Count(answer, `"status":"refunded"`) != 4 {
		t.Fatalf("a batch of 4 calls on a share of 4: %d %.300s, want four refunds", code, answer)
	}
}

// TestMCPBatchOverTheCallCapIsRefusedWhole: with no tenant share configured, a batch of
// 1,000 tool calls would run 1,000 refunds at once on one place of the server's cap. A batch
// over the cap of calls is refused whole with one JSON-RPC error naming the cap; nothing is
// sent and every call of it is recorded as the tenant's refused request.
// ops rule 8: every client request is recorded, refused ones with their reason.
func TestMCPBatchOverTheCallCapIsRefusedWhole(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 5*time.Second)
	code, answer := e.postMCP(t, "2025-03-26", strings.NewReader(batchOf(1000)))
	if code != 422 || !strings.Contains(rpcError(t, answer), "at most") {
		t.Fatalf("a batch of 1,000 calls: %d %.300s, want 422 with one error naming the cap", code, answer)
	}
	if n := len(e.fake.Refunds()); n != 0 {
		t.Fatalf("the refused batch made %d refunds", n)
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("the refused batch opened %d operations", n)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND reason = 'batch_too_large'`); n != 1000 {
		t.Fatalf("%d of the batch's 1,000 calls recorded as refused batch_too_large", n)
	}
}
