package mcptool

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
)

// MetaRequestID is the _meta key under which a transport stamps the JSON-RPC id of a
// tools/call. The SDK keeps the id from tool handlers, and the id is what ties a recorded
// client request to the agent's call when the client sends no tool call id of its own.
const MetaRequestID = "dev.settle/jsonrpc_id"

// toolCallIDKeys are the _meta keys under which MCP clients pass the model's own tool call
// id (toolu_01...). There is no standard key yet, so the common spellings are all read.
var toolCallIDKeys = []string{"tool_call_id", "toolCallId", "tool_use_id", "toolUseId"}

// maxRequestRef is the longest request_ref the ledger accepts.
const maxRequestRef = 255

// RequestRef returns what a tool call is recorded under as the client request's
// request_ref: the client's tool call id from _meta if it sent one, else "mcp:" and the
// JSON-RPC id a transport stamped, else "". An id too long to record is passed over rather
// than refusing a call the model could not fix.
func RequestRef(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	meta := req.Params.Meta
	for _, k := range toolCallIDKeys {
		// A model's id that is not a storable reference (ops.CheckRef) is passed over, so a
		// malformed one never stops the tool or fails the recording of the call.
		if v, ok := meta[k].(string); ok && strings.TrimSpace(v) != "" && ops.CheckRef(k, v, maxRequestRef) == nil {
			return strings.TrimSpace(v)
		}
	}
	if v, ok := meta[MetaRequestID].(string); ok && v != "" && ops.CheckRef(MetaRequestID, v, maxRequestRef-4) == nil {
		return "mcp:" + v
	}
	return ""
}

// StampRequest writes the JSON-RPC id of a tools/call request into its params' _meta under
// MetaRequestID, replacing whatever the client put there. Other messages are left alone.
func StampRequest(req *jsonrpc.Request) error {
	if req == nil || req.Method != "tools/call" || !req.ID.IsValid() {
		return nil
	}
	params := map[string]json.RawMessage{}
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			// Not an object: leave it for the server to refuse as invalid params.
			return nil
		}
	}
	meta := map[string]any{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil
		}
	}
	meta[MetaRequestID] = fmt.Sprint(req.ID.Raw())
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("stamp request id: %w", err)
	}
	params["_meta"] = b
	if req.Params, err = json.Marshal(params); err != nil {
		return fmt.Errorf("stamp request id: %w", err)
	}
	return nil
}

// StampMessage is StampRequest over an encoded JSON-RPC message or batch, for transports
// that see bytes (an HTTP body): every tools/call request in it is stamped, the calls of a
// batch as much as a single one, so a client's own _meta never stands in for its id.
// Anything else comes back as is, for the server to handle or refuse.
func StampMessage(data []byte) []byte {
	var batch []json.RawMessage
	if json.Unmarshal(data, &batch) != nil {
		return stampOne(data)
	}
	for i, m := range batch {
		batch[i] = stampOne(m)
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return data
	}
	return out
}

// stampOne is StampMessage over a single message.
func stampOne(data []byte) []byte {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return data
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" {
		return data
	}
	if err := StampRequest(req); err != nil {
		return data
	}
	out, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return data
	}
	return out
}
