package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPRefundInAnotherCurrencyThanThePaymentIsRefused: an agent asks to refund 38.00 EUR
// of a payment made in USD. The call is refused naming currency_mismatch, says it sent
// nothing, opens no operation, refunds nothing and is recorded as the tenant's refused
// request.
// ops rule 8: every client request is recorded, refused ones with their reason.
func TestMCPRefundInAnotherCurrencyThanThePaymentIsRefused(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	args := storyArgs()
	args["currency"] = "eur"
	res, ans, text := call(t, cs, "issue_refund", args, mcp.Meta{"tool_call_id": "toolu_eur"})
	if !res.IsError || ans.Status != "" || !strings.Contains(text, "currency_mismatch") || !strings.Contains(text, "This call sent nothing") {
		t.Fatalf("a refund in EUR of a USD payment: %+v %q", ans, text)
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened", n)
	}
	if len(e.fake.Refunds()) != 0 {
		t.Fatal("a refund in another currency was made")
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'toolu_eur' AND answer = 'rejected' AND reason = 'currency_mismatch'`); n != 1 {
		t.Fatalf("%d refused requests recorded for the call, want 1", n)
	}
}
