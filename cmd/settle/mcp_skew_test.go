package main

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// A stdio server on a host whose clock runs a minute off the database's refuses to start,
// with one line naming both clocks, the difference and the limit, as serve does
// (TestServeRefusesAClockOffTheDatabases): its refund tool would judge other processes'
// leases by that clock and could send again what another replica is still sending (ops rule
// 11).
func TestMCPStdioRefusesAClockOffTheDatabases(t *testing.T) {
	t.Parallel()
	_, url, token := shopDatabase(t, "agent")
	_, base := shopStripe(t)
	cfg := Config{Command: "mcp", DatabaseURL: url,
		Stripe: StripeConfig{APIKey: "sk_test_stdio", APIBase: base, Timeout: time.Second, Deadline: 3 * time.Second}}
	for _, off := range []time.Duration{time.Minute, -time.Minute} {
		clock := &offsetClock{}
		clock.set(off)
		run := stdioRun{Config: cfg, Clock: clock, SkewInterval: time.Hour, Token: token, Logger: testLogger(t)}
		err := run.serve(context.Background(), strings.NewReader(""), io.Discard)
		if err == nil {
			t.Errorf("mcp --stdio started on a clock %s off the database's", off)
			continue
		}
		line := errorLine(err)
		if !errors.Is(err, ops.ErrClockSkew) || strings.Contains(line, "\n") || !strings.Contains(line, "database server's") ||
			!regexp.MustCompile(`(59\.9\d*s|1m0(\.0\d*)?s) apart, past the limit of 3s`).MatchString(line) {
			t.Errorf("mcp --stdio on a clock %s off: %v, want one line naming both clocks, the difference and the limit", off, err)
		}
	}
}

// While a stdio server runs, a clock that drifts past the limit refuses its refunds with
// clock_skew, sending nothing and recording each refused call (ops rules 8, 11), as serve's
// ledger does; back in step, the same call refunds.
func TestMCPStdioGatesRefundsWhileTheClockIsOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &offsetClock{}
	a := startStdioAgentWith(t, func(run *stdioRun, _ *fake.Stripe) {
		run.Clock, run.SkewInterval = clock, 20*time.Millisecond
	})
	db, fk, cs := a.db, a.fake, a.cs
	first := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417"}
	second := map[string]any{"order_id": "4418", "amount_cents": 5000, "currency": "usd", "payment_intent": "pi_4418"}
	call := func(args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		if err != nil {
			t.Fatalf("issue_refund: %v", err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		return res, text
	}

	// The guard measures within its interval: a call before that may still go through.
	clock.set(time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for _, text := call(first); !strings.Contains(text, "clock is off") && time.Now().Before(deadline); _, text = call(first) {
		time.Sleep(20 * time.Millisecond)
	}
	refunds := len(fk.Refunds())
	res, text := call(second)
	if !res.IsError || !strings.Contains(text, "clock is off") || !strings.Contains(text, "sent nothing") {
		t.Fatalf("issue_refund with the clock a minute off: %s, want a refusal for the clock skew", text)
	}
	if n := len(fk.Refunds()); n != refunds {
		t.Fatalf("%d refunds at the fake after a refusal for the clock skew, want %d", n, refunds)
	}
	var rejected, opened int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE answer = 'rejected'),
		(SELECT count(*) FROM operations WHERE order_ref = '4418') FROM client_requests`).Scan(&rejected, &opened); err != nil || rejected == 0 || opened != 0 {
		t.Fatalf("%d refused calls recorded, %d operations for order 4418 (%v); want the refusals recorded and no operation", rejected, opened, err)
	}

	clock.set(0)
	deadline = time.Now().Add(10 * time.Second)
	for res, text = call(second); res.IsError && time.Now().Before(deadline); res, text = call(second) {
		time.Sleep(20 * time.Millisecond)
	}
	if res.IsError || len(fk.Refunds()) != refunds+1 {
		t.Fatalf("issue_refund with the clock back in step: %s; %d refunds, want %d", text, len(fk.Refunds()), refunds+1)
	}
}
