package mcptool

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops/refund"
)

// The input schema advertises the limits refund.Request.Validate enforces: a client
// that trusts the schema is never surprised by Validate, nor the other way round.
func TestSchemaAgreesWithValidate(t *testing.T) {
	resolved, err := issueRefundTool.InputSchema.(*jsonschema.Schema).Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	base := refund.Request{TenantID: 1, OrderID: "4417", AmountCents: 3800, Currency: "usd", PaymentIntent: "pi_4417", Reason: "requested_by_customer"}
	cases := []func(r *refund.Request){
		func(r *refund.Request) {},
		func(r *refund.Request) { r.AmountCents = 0 },
		func(r *refund.Request) { r.AmountCents = -1 },
		func(r *refund.Request) { r.AmountCents = 1 },
		func(r *refund.Request) { r.AmountCents = refund.MaxCents },
		func(r *refund.Request) { r.AmountCents = refund.MaxCents + 1 },
		func(r *refund.Request) { r.OrderID = "" },
		func(r *refund.Request) { r.OrderID = "A-1_2.3:4#5/6" },
		func(r *refund.Request) { r.OrderID = "-leading" },
		func(r *refund.Request) { r.OrderID = "with space" },
		func(r *refund.Request) { r.OrderID = string(make([]byte, 65)) },
		func(r *refund.Request) {
			r.OrderID = "x234567890123456789012345678901234567890123456789012345678901234"
		},
		func(r *refund.Request) {
			r.OrderID = "x2345678901234567890123456789012345678901234567890123456789012345"
		},
		func(r *refund.Request) { r.PaymentIntent = "pi_" },
		func(r *refund.Request) { r.PaymentIntent = "ch_123" },
		func(r *refund.Request) { r.PaymentIntent = "pi_abc-def" },
		func(r *refund.Request) { r.Reason = "because" },
		func(r *refund.Request) { r.Reason = "duplicate" },
		func(r *refund.Request) { r.Currency = "USD" },
		func(r *refund.Request) { r.Currency = "us" },
	}
	for i, mutate := range cases {
		r := base
		mutate(&r)
		args := map[string]any{"order_id": r.OrderID, "amount_cents": r.AmountCents, "currency": r.Currency, "payment_intent": r.PaymentIntent}
		if r.Reason != "" {
			args["reason"] = r.Reason
		}
		var v any
		b, _ := json.Marshal(args)
		_ = json.Unmarshal(b, &v)
		schemaErr := resolved.Validate(v)
		validateErr := r.Validate()
		if (schemaErr == nil) != (validateErr == nil) {
			t.Errorf("case %d %+v: schema says %v, Validate says %v", i, r, schemaErr, validateErr)
		}
	}
	// Currencies are checked by Validate alone: the schema only asks for three letters.
	r := base
	r.Currency = "zzz"
	if r.Validate() == nil {
		t.Error("Validate accepts currency zzz")
	}
}

func TestStampRequestAndRequestRef(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(7))
	req := &jsonrpc.Request{ID: id, Method: "tools/call",
		Params: json.RawMessage(`{"name":"issue_refund","arguments":{"order_id":"1"},"_meta":{"dev.settle/jsonrpc_id":"forged","progressToken":3}}`)}
	if err := StampRequest(req); err != nil {
		t.Fatal(err)
	}
	var p mcp.CallToolParamsRaw
	if err := json.Unmarshal(req.Params, &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "issue_refund" || string(p.Arguments) != `{"order_id":"1"}` || p.Meta["progressToken"] != float64(3) {
		t.Fatalf("stamping changed the call: %s", req.Params)
	}
	call := &mcp.CallToolRequest{Params: &p}
	if got := RequestRef(call); got != "mcp:7" {
		t.Fatalf("RequestRef = %q, want mcp:7", got)
	}
	p.Meta["toolCallId"] = "toolu_01"
	if got := RequestRef(call); got != "toolu_01" {
		t.Fatalf("RequestRef = %q, want the tool call id", got)
	}
	// A tool call id that could not be stored (a NUL, broken UTF-8, a control character) is
	// passed over for the JSON-RPC id: the call is still recorded, never failed by its id.
	for _, bad := range []string{"toolu\x00", "toolu\xc3", "toolu\x1b"} {
		p.Meta["toolCallId"] = bad
		if got := RequestRef(call); got != "mcp:7" {
			t.Fatalf("RequestRef with tool call id %q = %q, want mcp:7", bad, got)
		}
	}
	// Other methods and notifications pass untouched.
	list := &jsonrpc.Request{ID: id, Method: "tools/list", Params: json.RawMessage(`{}`)}
	if err := StampRequest(list); err != nil || string(list.Params) != `{}` {
		t.Fatalf("tools/list stamped: %s %v", list.Params, err)
	}
	if got := StampMessage([]byte(`not json`)); string(got) != "not json" {
		t.Fatalf("garbage changed: %s", got)
	}
	body := StampMessage([]byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"refund_status"}}`))
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.(*jsonrpc.Request).Params, &p); err != nil || p.Meta[MetaRequestID] != "abc" {
		t.Fatalf("stamped body %s (%v)", body, err)
	}
}
