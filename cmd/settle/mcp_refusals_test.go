package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// refusedRefs lists the request refs of refused refund requests, in order.
func (a *stdioAgent) refusedRefs(t *testing.T) []string {
	t.Helper()
	rows, err := a.db.Pool.Query(context.Background(), `SELECT request_ref FROM client_requests
		WHERE kind = 'refund' AND answer = 'rejected' AND operation_id IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var refs []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	return refs
}

// TestMCPStdioCallsTheSDKRefusesAreRecorded: over stdio, a tools/call of a tool the server
// does not have, whose params the SDK cannot read, or without an id, is refused before any
// tool runs; the token names its tenant, so each is recorded once as a refused refund
// request, and each with an id is answered with an error that says what was wrong and that
// the call sent nothing. The protocol's own messages (ping, tools/list) record nothing.
// ops rule 8.
func TestMCPStdioCallsTheSDKRefusesAreRecorded(t *testing.T) {
	t.Parallel()
	a, world, _ := startRawAgent(t)
	for _, c := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":"p","method":"ping"}`, `"result"`},
		{`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, `"result"`},
		{`{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":"cancel_refund","arguments":{},"_meta":{"tool_call_id":"toolu_u1"}}}`,
			`There is no tool \"cancel_refund\"`},
		{`{"jsonrpc":"2.0","id":"u2","method":"tools/call","params":"issue_refund"}`, "needs params"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":42}}`, "params.name"},
	} {
		a.send(t, c.line)
		reply := a.reply(t)
		if !strings.Contains(reply, c.want) || (c.want != `"result"` && !strings.Contains(reply, "This call sent nothing")) {
			t.Fatalf("%s was answered %.400s, want %s", c.line, reply, c.want)
		}
	}
	// A call without an id is a notification: it gets no answer, and is recorded all the same.
	a.send(t, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"issue_refund","arguments":{},"_meta":{"tool_call_id":"toolu_noid"}}}`)
	a.send(t, `{"jsonrpc":"2.0","id":"p2","method":"ping"}`)
	if reply := a.reply(t); !strings.Contains(reply, `"p2"`) {
		t.Fatalf("after a call without an id, ping was answered %.300s", reply)
	}
	// The call without an id gets no answer to wait for, and the server may answer the ping
	// read after it before that call's record commits: wait for it a while.
	for deadline := time.Now().Add(5 * time.Second); len(world.refusedRefs(t)) < 4 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if refs := world.refusedRefs(t); strings.Join(refs, ",") != "toolu_u1,mcp:u2,mcp:3,toolu_noid" {
		t.Fatalf("refused requests recorded %q, want each refused call once", refs)
	}
	if n := world.count(t, `SELECT count(*) FROM client_requests`); n != 4 {
		t.Fatalf("%d client requests, want the four calls", n)
	}
}

// TestMCPStdioDroppedToolCallsAreRecorded: a line the server drops without handing it to
// the SDK (an id that is no id, bytes cut short, a line over the limit) is still a tool call
// of the token's tenant once it reads "tools/call": each is recorded once as a refused refund
// request, and its error says the call sent nothing; the session goes on. ops rule 8.
func TestMCPStdioDroppedToolCallsAreRecorded(t *testing.T) {
	t.Parallel()
	a, world, _ := startRawAgent(t)
	refund := `"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}`
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":{"a":1},` + refund + `,"_meta":{"tool_call_id":"toolu_obj"}}}`,
		`{"jsonrpc":"2.0","id":1e400,` + refund + `}}`,
		`{"jsonrpc":"2.0","id":"cut",` + refund,
		`{"jsonrpc":"2.0","id":"long",` + refund[:len(refund)-1] + `,"note":"` + strings.Repeat("x", 4<<20) + `"}}}`,
	} {
		a.send(t, line)
		if reply := a.reply(t); !strings.Contains(reply, `"error"`) || !strings.Contains(reply, "This call sent nothing") {
			t.Fatalf("%.80s... was answered %.400s, want an error saying the call sent nothing", line, reply)
		}
	}
	a.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if reply := a.reply(t); !strings.Contains(reply, `"result"`) {
		t.Fatalf("the session ended: ping answered %.300s", reply)
	}
	if refs := world.refusedRefs(t); strings.Join(refs, ",") != "toolu_obj,mcp:1e400,mcp:cut,mcp:long" {
		t.Fatalf("refused requests recorded %q, want each dropped call once", refs)
	}
	if n := len(world.fake.Refunds()); n != 0 {
		t.Fatalf("%d refunds for dropped lines", n)
	}
}
