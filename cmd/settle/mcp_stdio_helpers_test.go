package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg"
)

// stdioAgent is a local agent talking to 'settle mcp --stdio' over pipes with the SDK's own
// client, for tenant "shop" against the fake Stripe, whose payment pi_4417 (3800 usd) and
// pi_4418 (5000 usd) are the shop's.
type stdioAgent struct {
	db    *pg.DB
	url   string
	token string
	fake  *fake.Stripe
	cs    *mcp.ClientSession
}

func startStdioAgent(t *testing.T) *stdioAgent {
	t.Helper()
	return startStdioAgentWith(t, nil)
}

// startStdioAgentWith is startStdioAgent with its server's settings (configuration, clock,
// skew interval) changed by tune first, and the fake's faults, if any, added by it before
// the server starts.
func startStdioAgentWith(t *testing.T, tune func(*stdioRun, *fake.Stripe)) *stdioAgent {
	t.Helper()
	ctx := context.Background()
	db, url, token := shopDatabase(t, "agent")
	fk, base := shopStripe(t)
	fk.AddPaymentIntent("pi_4418", 5000, "usd", fake.OwnedBy("shop"))
	cfg := Config{Command: "mcp", DatabaseURL: url,
		Stripe: StripeConfig{APIKey: "sk_test_stdio", APIBase: base, Timeout: time.Second, Deadline: 3 * time.Second}}
	run := stdioRun{Config: cfg, Clock: ops.SystemClock{}, SkewInterval: ops.DefaultSkewInterval, Token: token, Logger: testLogger(t)}
	if tune != nil {
		tune(&run, fk)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- run.serve(ctx, inR, outW)
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "local-agent", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		<-served
	})
	return &stdioAgent{db: db, url: url, token: token, fake: fk, cs: cs}
}

// call calls a tool with arguments (a map, or json.RawMessage sent byte for byte) and
// returns the result, its structured answer and its text.
func (a *stdioAgent) call(t *testing.T, tool string, args any) (*mcp.CallToolResult, mcptool.Answer, string) {
	t.Helper()
	res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	ans, text := testworld.ToolResult(t, tool, res)
	return res, ans, text
}

func (a *stdioAgent) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
