package mcptool

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RefundCallRefs returns, for each issue_refund call in an encoded JSON-RPC message or
// batch, the request_ref issue_refund would record it under (RequestRef). A transport that
// refuses a whole message before the server reads it, once the message has named its
// tenant, records each of these calls as that tenant's refused request (ops rule 8); the
// other messages (listing tools, reading a refund's status) are no refund request and
// record nothing when served either. Stamp the message first (StampMessage), so that a call
// without an id of the client's own is recorded under its JSON-RPC id.
func RefundCallRefs(data []byte) []string {
	var batch []json.RawMessage
	if json.Unmarshal(data, &batch) != nil {
		batch = []json.RawMessage{data}
	}
	var refs []string
	for _, m := range batch {
		if ref, ok := refundCallRef(m); ok {
			refs = append(refs, ref)
		}
	}
	return refs
}

// refundCallRef is the request_ref of one message if it is an issue_refund call the server
// would run: a request (with an id) whose params name the tool.
func refundCallRef(data []byte) (string, bool) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return "", false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" || !req.ID.IsValid() {
		return "", false
	}
	var p mcp.CallToolParamsRaw
	if json.Unmarshal(req.Params, &p) != nil || p.Name != issueRefundTool.Name {
		return "", false
	}
	return RequestRef(&mcp.CallToolRequest{Params: &p}), true
}
