package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/refund"
)

// A local agent runs 'settle mcp --stdio' and refunds over its stdin and stdout: same
// ledger, same one refund per intent, its JSON-RPC id recorded as the request_ref.
func TestMCPStdioRefundsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, token := shopDatabase(t, "agent")
	fk, base := shopStripe(t)
	cfg := Config{Command: "mcp", DatabaseURL: url,
		Stripe: StripeConfig{APIKey: "sk_test_stdio", APIBase: base, Timeout: time.Second, Deadline: 3 * time.Second}}

	// A wrong token is refused at start, before anything is served.
	if err := serveMCPStdio(ctx, cfg, "stl_nope", strings.NewReader(""), io.Discard, testLogger(t)); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("wrong token: %v, want unauthorized", err)
	}
	if err := serveMCPStdio(ctx, cfg, "", strings.NewReader(""), io.Discard, testLogger(t)); err == nil || !strings.Contains(err.Error(), envMCPToken.Name) {
		t.Fatalf("no token: %v, want a pointer to %s", err, envMCPToken.Name)
	}

	inR, inW := io.Pipe()   // the agent writes, the server reads
	outR, outW := io.Pipe() // the server writes, the agent reads
	served := make(chan error, 1)
	go func() {
		served <- serveMCPStdio(ctx, cfg, token, inR, outW, testLogger(t))
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "local-agent", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417"}
	var answers []mcptool.Answer
	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("issue_refund: %v %+v", err, res)
		}
		var a mcptool.Answer
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &a)
		answers = append(answers, a)
	}
	if answers[0].Status != refund.Refunded || answers[1].Status != refund.Refunded || answers[0].RefundID != answers[1].RefundID {
		t.Fatalf("answers %+v", answers)
	}
	if n := len(fk.Refunds()); n != 1 {
		t.Fatalf("%d refunds at the fake, want 1", n)
	}
	rows, err := db.Pool.Query(ctx, `SELECT request_ref FROM client_requests WHERE operation_id = $1 ORDER BY id`, answers[0].OperationID)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		refs = append(refs, r)
	}
	if len(refs) != 2 || !strings.HasPrefix(refs[0], "mcp:") || !strings.HasPrefix(refs[1], "mcp:") || refs[0] == refs[1] {
		t.Fatalf("request refs %q, want two distinct JSON-RPC ids", refs)
	}

	// The agent hanging up ends the server cleanly.
	cs.Close()
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("server ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop when the agent hung up")
	}
}
