package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
)

// ReasonRefusedCall is the reason of a tools/call the MCP SDK refused before any tool saw it:
// an unknown tool, a message it could not read, a body over its limit.
const ReasonRefusedCall = "refused_call"

// ToolCall is a tools/call request as far as a transport could read its bytes. A message the
// SDK refuses (cut short, an id that is no id, params that are no object) is still a tool
// call once its method reads "tools/call", and still a request of the tenant its token names.
type ToolCall struct {
	// ID is the JSON-RPC id as the client wrote it; nil when it sent none or it could not be
	// read.
	ID json.RawMessage
	// Name is the tool it names; empty when it names none a string can hold.
	Name string
	// Meta is its params' _meta, when it could be read.
	Meta map[string]any
	// Params says its params were read as an object.
	Params bool
}

// Ref is what the call is recorded under: the client's tool call id from _meta, else "mcp:"
// and its JSON-RPC id, as RequestRef says for a call that reaches its tool.
func (c ToolCall) Ref() string {
	meta := mcp.Meta{}
	for k, v := range c.Meta {
		meta[k] = v
	}
	delete(meta, MetaRequestID)
	var id any
	dec := json.NewDecoder(bytes.NewReader(c.ID))
	dec.UseNumber()
	if dec.Decode(&id) == nil {
		switch v := id.(type) {
		case string:
			meta[MetaRequestID] = v
		case json.Number:
			meta[MetaRequestID] = v.String()
		}
	}
	return RequestRef(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta}})
}

// IDKey is a JSON-RPC id in one spelling, to match a call with its answer; empty when it is
// none (absent, null, or neither a string nor a number).
func IDKey(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(raw) == 0 || dec.Decode(&v) != nil {
		return ""
	}
	switch v.(type) {
	case string, json.Number:
	default:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// ToolCalls lists the tools/call requests of an encoded JSON-RPC message or batch, reading
// as far as the bytes allow: data may be cut short (the first bytes of a body over the
// limit) or malformed, and a message counts as a call once its method has been read as
// "tools/call". A call whose method comes after the point where the bytes fail is not
// found.
func ToolCalls(data []byte) []ToolCall {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	if tok == json.Delim('{') {
		if c, ok := scanMessage(dec); ok {
			return []ToolCall{c}
		}
		return nil
	}
	if tok != json.Delim('[') {
		return nil
	}
	var calls []ToolCall
	for dec.More() {
		start := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			// The element is cut short or malformed: read it on its own as far as it goes.
			return append(calls, ToolCalls(bytes.TrimLeft(data[start:], " \t\r\n,"))...)
		}
		calls = append(calls, ToolCalls(raw)...)
	}
	return calls
}

// scanMessage reads the members of one message after its opening brace, stopping at the
// first fault, and reports whether it is a tools/call.
func scanMessage(dec *json.Decoder) (ToolCall, bool) {
	var c ToolCall
	var method string
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			break
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		switch key {
		case "method":
			_ = json.Unmarshal(raw, &method)
		case "id":
			c.ID = raw
		case "params":
			c.Name, c.Meta, c.Params = readParams(raw)
		}
	}
	return c, method == "tools/call"
}

// readParams reads the tool's name and the _meta of a call's params, each only where it is
// of the right type.
func readParams(raw json.RawMessage) (name string, meta map[string]any, object bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return "", nil, false
	}
	_ = json.Unmarshal(p["name"], &name)
	_ = json.Unmarshal(p["_meta"], &meta)
	return name, meta, true
}

// toolNames are the names of the tools NewServer offers.
var toolNames = []string{issueRefundTool.Name, refundStatusTool.Name}

// CallRefusal is the refusal of a tools/call the SDK refused before any tool saw it, in
// words the client can act on. When the SDK refused the whole request (whole: a batch its
// protocol version does not allow, a call without an id, bytes that are no JSON-RPC), its
// words (what) say why. A call it read and refused alone is told what was wrong with it:
// an unknown tool is named with the tools there are, and a call without readable params or
// a tool's name is told what a call holds.
func CallRefusal(c ToolCall, what string, whole bool) error {
	msg := fmt.Sprintf("The request was refused before any tool ran (%s).", what)
	switch {
	case whole:
	case c.Name != "" && !slices.Contains(toolNames, c.Name):
		msg = fmt.Sprintf("There is no tool %q; this server's tools are %s and %s.", c.Name, toolNames[0], toolNames[1])
	case !c.Params:
		msg = "A tools/call needs params: an object with the tool's name and its arguments."
	case c.Name == "":
		msg = fmt.Sprintf("A tools/call must name its tool as a string in params.name: %s or %s.", toolNames[0], toolNames[1])
	}
	return &ops.Error{Code: ops.EINVALID, Reason: ReasonRefusedCall, Message: msg}
}

// RefuseCall records a tools/call that the SDK refused before any tool saw it as its
// tenant's refused client request (ops rule 8), and returns what the call is answered: the
// refusal, or the outage that kept it from being recorded. A call of refund_status is no
// request for a refund, as its answered calls are not, and is not recorded; every other
// call, an unknown tool's included, is recorded as a refund request, the only kind this
// server's tools open.
func (t *Tools) RefuseCall(ctx context.Context, tenantID int64, c ToolCall, refusal error) error {
	if c.Name == refundStatusTool.Name {
		return refusal
	}
	return t.Refunds.Refuse(ctx, tenantID, c.Ref(), refusal)
}

// RefusalText is the message of the JSON-RPC error a refused call is answered with: what
// was wrong and that the call sent nothing, or the outage that kept it from being recorded.
func RefusalText(err error) string {
	if ops.Unreachable(err) || ops.ErrorCode(err) == ops.EINTERNAL {
		return refusalText("tools/call", err)
	}
	return ops.ErrorMessage(err) + " This call sent nothing to the payment provider; fix the call and send it again."
}
