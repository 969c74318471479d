package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/refund"
)

// The demo agent's order: the support agent's refund of $38.00, on an order of its own so
// that it does not meet the HTTP story's refund of order 4417.
const (
	demoAgentOrder  = "4417-agent"
	demoAgentIntent = "pi_4417_agent"
	demoAgentCents  = 3800
)

// runDemoAgent plays the support agent of the refund story against the MCP server at
// mcpURL: it asks for the refund (toolu_01), the customer says "try again" (toolu_02), and it
// then checks the refund's status until someone settles it, logging every answer as the
// model would see it.
func runDemoAgent(ctx context.Context, mcpURL, token string, logger *slog.Logger) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-support-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, next: http.DefaultTransport}}}, nil)
	if err != nil {
		return fmt.Errorf("demo agent: connect to %s: %w", mcpURL, err)
	}
	defer cs.Close()
	args := map[string]any{"order_id": demoAgentOrder, "amount_cents": demoAgentCents, "currency": "usd",
		"payment_intent": demoAgentIntent, "reason": "requested_by_customer"}
	logger.Info("demo agent: the customer asks for a refund of $38.00", "order", demoAgentOrder)
	first, err := agentCall(ctx, cs, logger, "issue_refund", args, "toolu_01")
	if err != nil {
		return err
	}
	if first.Status == refund.Refunded || first.Status == refund.Failed {
		return nil
	}
	logger.Info("demo agent: the customer writes \"try again\"")
	if err := ops.SleepContext(ctx, 2*time.Second); err != nil {
		return nil
	}
	ans, err := agentCall(ctx, cs, logger, "issue_refund", args, "toolu_02")
	if err != nil {
		return err
	}
	// Later turns of the conversation: the agent checks until a person or the provider
	// settles the refund.
	for i := 0; ans.Status != refund.Refunded && ans.Status != refund.Failed && i < 40; i++ {
		if err := ops.SleepContext(ctx, 3*time.Second); err != nil {
			return nil
		}
		prev := ans.Status
		if ans, err = agentStatus(ctx, cs, first.OperationID); err != nil {
			return err
		}
		if ans.Status != prev {
			logger.Info("demo agent: refund_status", "status", ans.Status, "says", mcptool.Line(ans.Answer))
		}
	}
	return nil
}

// agentCall calls a tool as the model would, with its tool call id in _meta.
func agentCall(ctx context.Context, cs *mcp.ClientSession, logger *slog.Logger, tool string, args map[string]any, callID string) (mcptool.Answer, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{"tool_call_id": callID}})
	if err != nil {
		return mcptool.Answer{}, fmt.Errorf("demo agent: %s %s: %w", tool, callID, err)
	}
	ans, err := decodeAnswer(res)
	if err != nil {
		return ans, fmt.Errorf("demo agent: %s %s: %w", tool, callID, err)
	}
	logger.Info("demo agent: "+tool+" answered", "tool_call", callID, "status", ans.Status,
		"operation", ans.OperationID, "says", mcptool.Line(ans.Answer))
	return ans, nil
}

func agentStatus(ctx context.Context, cs *mcp.ClientSession, opID string) (mcptool.Answer, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_status", Arguments: map[string]any{"operation_id": opID}})
	if err != nil {
		return mcptool.Answer{}, fmt.Errorf("demo agent: refund_status: %w", err)
	}
	return decodeAnswer(res)
}

func decodeAnswer(res *mcp.CallToolResult) (mcptool.Answer, error) {
	var ans mcptool.Answer
	if res.IsError {
		msg := ""
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg += t.Text
			}
		}
		return ans, errors.New(msg)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return ans, fmt.Errorf("read the answer: %w", err)
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return ans, fmt.Errorf("read the answer: %w", err)
	}
	return ans, nil
}

// bearerTransport adds the tenant's API token to each request of an MCP client.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// agentStory replays the refund agent's timeout then try again through the MCP server, so
// it can be followed on the dashboard. Stripe makes the refund on the first send but answers only after the call has
// timed out, and then answers 503 to the next five sends: toolu_01 is answered
// "unconfirmed"; toolu_02, after "try again", resends with the same key, spends the
// operation's last attempts and is answered "checking"; the on-call's lookup then finds the
// refund at Stripe and closes the operation, which the agent's refund_status reports as
// refunded. Stripe's webhook for the refund arrives while the operation is still being
// sent, so it closes nothing and the lookup is what settles it. agentStory returns once the
// operation is unknown, so the demo's random faults, added next, cannot touch the story.
func (d *Traffic) agentStory(ctx context.Context) {
	if d.srv.Refunds == nil {
		return
	}
	d.fakes.Stripe.AddPaymentIntent(demoAgentIntent, demoAgentCents, "usd", fake.OwnedBy(d.tenant.Name))
	d.fakes.Stripe.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Delay: 10 * time.Second, Times: 1})
	d.fakes.Stripe.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultUnavailable, Times: 5})
	go func() {
		if err := runDemoAgent(ctx, d.srv.URL+"/mcp", d.token, d.log); err != nil && ctx.Err() == nil {
			d.log.Warn("demo agent", "err", err)
		}
	}()
	key := refund.IntentKey(demoAgentOrder, demoAgentCents, "usd")
	var op *ops.Operation
	for i := 0; i < 60; i++ {
		if ops.SleepContext(ctx, 500*time.Millisecond) != nil {
			return
		}
		cur, err := d.srv.DB.LatestForIntent(ctx, d.tenant.ID, ops.KindRefund, key)
		if err == nil && (cur.Status == ops.StatusUnknown || cur.Status.Final()) {
			op = cur
			break
		}
	}
	if op == nil || op.Status.Final() {
		return
	}
	go d.oncallLookup(ctx, op.ID)
}

// oncallLookup is the on-call engineer working the unknown queue: after a while (so the
// operation can be seen there) they look the refund up at Stripe, again every few seconds
// until it is closed.
func (d *Traffic) oncallLookup(ctx context.Context, opID string) {
	wait := 15 * time.Second
	for i := 0; i < 30; i, wait = i+1, 5*time.Second {
		if ops.SleepContext(ctx, wait) != nil {
			return
		}
		_, applied, err := d.srv.Refunds.Lookup(ctx, d.srv.DB, opID, "oncall@demo.settle")
		if err != nil {
			d.log.Warn("demo on-call lookup", "operation", opID, "err", err)
			continue
		}
		d.log.Info("demo on-call lookup", "operation", opID, "outcome", applied.Outcome)
		if op, err := d.srv.DB.Get(ctx, opID); err == nil && op.Status.Final() {
			d.log.Info("demo story: the agent's refund is settled", "operation", opID, "status", op.Status, "closed_by", op.ClosedBy)
			return
		}
	}
}
