package mcptool

import (
	"slices"
	"testing"
)

// A message refused whole before the server reads it records each issue_refund call in it,
// and only those, under the reference the tool would have recorded (ops rule 8): a batch's
// calls each under their own JSON-RPC id once stamped, a call with a tool call id under
// that id; a status read, a tool listing, a notification without id and a message that is
// not JSON-RPC record nothing.
func TestRefundCallRefsNameEachRefundCallOfAMessage(t *testing.T) {
	batch := StampMessage([]byte(`[
{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"4417"}}},
{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{},"_meta":{"tool_call_id":"toolu_01"}}},
{"jsonrpc":"2.0","id":"b3","method":"tools/call","params":{"name":"refund_status","arguments":{"operation_id":"x"}}},
{"jsonrpc":"2.0","id":"b4","method":"tools/list"},
{"jsonrpc":"2.0","method":"tools/call","params":{"name":"issue_refund","arguments":{}}}]`))
	if got, want := RefundCallRefs(batch), []string{"mcp:b1", "toolu_01"}; !slices.Equal(got, want) {
		t.Errorf("refund calls of a batch: %q, want %q", got, want)
	}
	one := StampMessage([]byte(`{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":{"name":"issue_refund","arguments":{}}}`))
	if got := RefundCallRefs(one); !slices.Equal(got, []string{"mcp:m1"}) {
		t.Errorf("refund call of one message: %q, want [mcp:m1]", got)
	}
	for _, body := range []string{`not json`, `{}`, `[]`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`} {
		if got := RefundCallRefs([]byte(body)); len(got) != 0 {
			t.Errorf("refund calls of %s: %q, want none", body, got)
		}
	}
}
