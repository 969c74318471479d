package main

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// TestMCPStdioRefusesARevokedToken: an operator revokes the API token of a local agent
// whose 'settle mcp --stdio' is still running ("servers refuse it within 5 s"). From its
// next tool call on, every call is refused, say that they sent nothing, and neither refund nor read
// the tenant's refunds: the token is what names the tenant, and a call whose token no
// longer does is no tenant's request (ops rule 8), so it opens no operation.
func TestMCPStdioRefusesARevokedToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, "agent")
	if err != nil {
		t.Fatal(err)
	}
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	fk.AddPaymentIntent("pi_4418", 5000, "usd", fake.OwnedBy("shop"))
	cfg := Config{Command: "mcp", DatabaseURL: url,
		Stripe: StripeConfig{APIKey: "sk_test_stdio", APIBase: base, Timeout: time.Second, Deadline: 3 * time.Second}}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
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
	defer func() {
		cs.Close()
		inW.Close()
		<-served
	}()
	first := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: first})
	if err != nil || res.IsError {
		t.Fatalf("issue_refund before the revocation: %v %+v", err, res)
	}
	var done mcptool.Answer
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &done)
	if done.Status != refund.Refunded {
		t.Fatalf("before the revocation: %+v", done)
	}

	// The operator revokes the agent's token with the CLI while the agent keeps running.
	tokens, err := accountstore.New(db).Tokens(ctx)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	code, stdout, stderr := run(t, []string{"token", "revoke", "--id", strconv.FormatInt(tokens[0].ID, 10)}, map[string]string{"DATABASE_URL": url}, "")
	if code != 0 || !strings.Contains(stdout, "within 5 s") {
		t.Fatalf("token revoke: exit %d: %s%s", code, stdout, stderr)
	}

	second := map[string]any{"order_id": "4418", "amount_cents": 5000, "currency": "usd", "payment_intent": "pi_4418"}
	calls := []*mcp.CallToolParams{
		{Name: "issue_refund", Arguments: second},
		{Name: "refund_status", Arguments: map[string]any{"operation_id": done.OperationID}},
	}
	for _, c := range calls {
		res, err := cs.CallTool(ctx, c)
		if err != nil {
			t.Fatalf("%s after the revocation: %v", c.Name, err)
		}
		text := ""
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || res.StructuredContent != nil || !strings.Contains(text, "revoked") || !strings.Contains(text, "sent nothing") {
			t.Errorf("%s after the revocation answered %q (structured %v), want a refusal naming the revoked token", c.Name, text, res.StructuredContent)
		}
	}
	if n := len(fk.Refunds()); n != 1 {
		t.Errorf("%d refunds at the fake, want only the one made before the revocation", n)
	}
	var ops, requests int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM client_requests)`).Scan(&ops, &requests); err != nil {
		t.Fatal(err)
	}
	if ops != 1 || requests != 1 {
		t.Errorf("%d operations and %d client requests after the revocation, want 1 and 1", ops, requests)
	}
}
