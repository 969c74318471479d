package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport wraps a stream transport (stdio) for the tools. Every tools/call it reads carries
// its JSON-RPC id in _meta (StampRequest). And the SDK refuses some calls before any tool
// sees them (an unknown tool, params it cannot read, no id): each is
// still a request of the tenant the token names, so the transport records it as refused
// (RefuseCall, ops rule 8) when the SDK's error answer passes out, and that answer then says
// what was wrong and that the call sent nothing, or the outage that kept it from being
// recorded. The tools answer every call they see with a result, never with a JSON-RPC
// error, so a call answered with one never reached a tool.
func (t *Tools) Transport(inner mcp.Transport) mcp.Transport { return callTransport{inner, t} }

type callTransport struct {
	mcp.Transport
	tools *Tools
}

func (t callTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &callConn{Connection: c, tools: t.tools, open: map[string]ToolCall{}}, nil
}

// callConn keeps the tool calls read and not yet answered, by id.
type callConn struct {
	mcp.Connection
	tools *Tools
	mu    sync.Mutex
	open  map[string]ToolCall
}

func (c *callConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" {
		return msg, nil
	}
	if err := StampRequest(req); err != nil {
		return nil, err
	}
	call := ToolCall{}
	call.Name, call.Meta, call.Params = readParams(req.Params)
	if !req.ID.IsValid() {
		// A call without an id is a notification: the SDK refuses it and answers nothing,
		// so it is recorded as it is read.
		c.record(ctx, call, "a tools/call needs an id", true)
		return msg, nil
	}
	call.ID, _ = json.Marshal(req.ID.Raw())
	c.mu.Lock()
	c.open[IDKey(call.ID)] = call
	c.mu.Unlock()
	return msg, nil
}

func (c *callConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		id, _ := json.Marshal(resp.ID.Raw())
		c.mu.Lock()
		call, open := c.open[IDKey(id)]
		delete(c.open, IDKey(id))
		c.mu.Unlock()
		if open && resp.Error != nil {
			msg = c.refuse(ctx, call, resp)
		}
	}
	return c.Connection.Write(ctx, msg)
}

// refuse records a call the SDK answered with an error, and returns the answer that says so.
func (c *callConn) refuse(ctx context.Context, call ToolCall, resp *jsonrpc.Response) *jsonrpc.Response {
	code := int64(codeInvalidRequest)
	var wire *jsonrpc.Error
	if errors.As(resp.Error, &wire) {
		code = wire.Code
	}
	text := c.record(ctx, call, resp.Error.Error(), false)
	return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: code, Message: text}}
}

// record records a refused call as the token's tenant's request and returns the message it
// is answered with. A token that no longer names a tenant records nothing: the call is no
// tenant's request.
func (c *callConn) record(ctx context.Context, call ToolCall, what string, whole bool) string {
	tenant, err := c.tools.Tenant(ctx, &mcp.CallToolRequest{})
	if err != nil {
		return refusalText("tools/call", err)
	}
	return RefusalText(c.tools.RefuseCall(ctx, tenant.ID, call, CallRefusal(call, what, whole)))
}

// refuseLine records the tool calls of a line a LineFilter dropped and returns the message
// they are answered with, or "" when the line shows none.
func (t *Tools) refuseLine(line []byte, reason string) string {
	calls := ToolCalls(bytes.TrimSpace(line))
	if len(calls) == 0 {
		return ""
	}
	ctx := context.Background()
	tenant, err := t.Tenant(ctx, &mcp.CallToolRequest{})
	if err != nil {
		return refusalText("tools/call", err)
	}
	var answer error
	for _, c := range calls {
		answer = t.RefuseCall(ctx, tenant.ID, c, CallRefusal(c, reason, true))
	}
	return RefusalText(answer)
}
