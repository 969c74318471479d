package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// TestMCPPendingRefundAnswersWithinTheToolsOutputSchema: a refund Stripe accepted but the
// bank has not settled is answered refund_pending on every path. Over MCP the answer must
// fit the output schema the tools declare, since clients that validate structured results
// against it (as the MCP specification asks) would otherwise drop the answer of a refund
// that was made, and the tools must describe the status they may answer (ops rule 12).
func TestMCPPendingRefundAnswersWithinTheToolsOutputSchema(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	fk, base := tw.Stripe(fake.StripeOptions{Seed: 1, PendingRefunds: true})
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	ledger := ops.NewLedger(tw.DB, ops.SystemClock{})
	s.Clock = ops.SystemClock{}
	s.Refunds = &refund.Tool{Ledger: ledger, Store: tw.DB, Provider: tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_mcp", AttemptTimeout: time.Second}), Deadline: 3 * time.Second}
	s.Operations, s.RefundStatus = tw.DB, tw.DB
	tenant := tw.Tenant("shop")
	e := &mcpEnv{db: tw.DB, url: tw.Serve(s.Handler()), token: tw.Token(tenant, "agent"), fake: fk, tenant: tenant}
	cs := e.session(t)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if !strings.Contains(tool.Description, `"`+refund.Pending+`"`) {
			t.Errorf("%s's description does not say what %q means", tool.Name, refund.Pending)
		}
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range list.Tools {
		var sch jsonschema.Schema
		b, _ := json.Marshal(tool.OutputSchema)
		if err := json.Unmarshal(b, &sch); err != nil {
			t.Fatal(err)
		}
		if schemas[tool.Name], err = sch.Resolve(nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"issue_refund", storyArgs()}, {"refund_status", map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd"}}} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.tool, err, res)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		if out["status"] != refund.Pending {
			t.Fatalf("%s answered %v, want %s", c.tool, out, refund.Pending)
		}
		if err := schemas[c.tool].Validate(out); err != nil {
			t.Errorf("%s's answer %v does not fit its output schema: %v", c.tool, out, err)
		}
	}
}
