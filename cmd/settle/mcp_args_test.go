package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPArgumentsAreReadByTheirExactNames: a tool's arguments are read by their exact
// names, each once. An agent (or a prompt injected into it) that sends amount_cents: 100
// for a person to approve and AMOUNT_CENTS: 3800 beside it must not refund 3800, nor must a
// name given twice let the last one win unseen: such a call is refused, naming the argument,
// sends nothing, and is recorded as a rejected request (ops rules 8 and 12).
func TestMCPArgumentsAreReadByTheirExactNames(t *testing.T) {
	t.Parallel()
	a := startStdioAgent(t)
	cases := []struct {
		tool, args, want string
	}{
		{"issue_refund", `{"order_id":"4417","amount_cents":100,"AMOUNT_CENTS":3800,"currency":"usd","payment_intent":"pi_4417"}`, `"AMOUNT_CENTS"`},
		{"issue_refund", `{"Order_ID":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}`, `"Order_ID"`},
		{"issue_refund", `{"order_id":"4417","amount_cents":100,"currency":"usd","payment_intent":"pi_4417","amount_cents":3800}`, `amount_cents`},
		{"refund_status", `{"OPERATION_ID":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`, `"OPERATION_ID"`},
		{"refund_status", `{"order_id":"4417","order_id":"4418"}`, `order_id`},
	}
	for _, c := range cases {
		res, ans, text := a.call(t, c.tool, json.RawMessage(c.args))
		if !res.IsError || ans.Status != "" || !strings.Contains(text, c.want) || !strings.Contains(text, "This call sent nothing") {
			t.Errorf("%s %s: answered %q (%+v), want a refusal naming %s", c.tool, c.args, text, ans, c.want)
		}
	}
	if n := len(a.fake.Refunds()); n != 0 {
		t.Errorf("%d refunds at the fake, want none", n)
	}
	if n := a.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Errorf("%d operations opened, want none", n)
	}
	if n := a.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != 3 {
		t.Errorf("%d rejected issue_refund calls recorded, want 3", n)
	}
}
