// Package mcptool is the refund tool for AI agents: the issue_refund and refund_status tools
// of Settle's MCP server. The tools call the same refund.Tool as POST /api/v1/refunds, so an
// agent gets the same one-refund-per-intent guarantee and the same four truthful answers;
// their descriptions and results tell the model what each answer allows it to say.
//
// The package knows nothing of HTTP or stdio: a transport decides which tenant a call acts
// for (TenantFunc) and stamps each tools/call with its JSON-RPC id (StampRequest), and the
// tools do the rest.
package mcptool

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// Refunder is the refund flow the tools call: in production the very refund.Tool that
// serves POST /api/v1/refunds.
type Refunder interface {
	Refund(ctx context.Context, req refund.Request) (refund.Answer, error)
	// Refuse records a call refused before its arguments could be read, so every client
	// request is counted (ops rule 8), and returns what the call is answered: the refusal,
	// or the outage that kept it from being recorded.
	Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error
}

// StatusStore reads what refund_status reports. *pg.DB implements it.
type StatusStore interface {
	// Get returns one operation or ENOTFOUND.
	Get(ctx context.Context, id string) (*ops.Operation, error)
	// LatestForIntent returns the newest operation of an intent or ENOTFOUND.
	LatestForIntent(ctx context.Context, tenantID int64, kind ops.Kind, intentKey string) (*ops.Operation, error)
	// LastAttemptError returns the error code of an operation's latest finished attempt.
	LastAttemptError(ctx context.Context, opID string) (string, error)
	// MadeCharges reads the refunds of an operation that took money, for a failed one's
	// answer (ops rule 12).
	ops.MadeCharges
}

// OrderFinder is what a StatusStore may also implement so refund_status can find a refund
// by its order alone. Without it the model must also pass amount_cents and currency.
type OrderFinder interface {
	// LatestRefundForOrder returns the tenant's newest refund operation on an order with
	// the number of refund intents (amount and currency) the order has, or ENOTFOUND.
	LatestRefundForOrder(ctx context.Context, tenantID int64, orderID string) (op *ops.Operation, intents int, err error)
}

// TenantFunc says which tenant a tool call acts for, from the API token the call came with:
// the HTTP transport's bearer token, or the token a stdio server was started with, checked
// again at every call so a revoked token stops the next one. An error refuses the call
// before anything is recorded or sent.
type TenantFunc func(ctx context.Context, req *mcp.CallToolRequest) (*ops.Tenant, error)

// Tools holds the dependencies of the refund tools. Set the fields, then call NewServer.
type Tools struct {
	Refunds Refunder
	Status  StatusStore
	Tenant  TenantFunc
	Logger  *slog.Logger
}

// Implementation names the server to MCP clients.
var Implementation = &mcp.Implementation{Name: "settle", Title: "Settle refunds", Version: "1"}

// instructions is what a client may put in the model's system prompt for this server.
const instructions = `Settle performs refunds exactly once per intent and tells you the truth about each one.
Use issue_refund to refund an order and refund_status to check on a refund you asked for earlier.
Each answer has a status: refunded, unconfirmed, checking or failed. Tell the customer only what the
status allows (see customer_message): never say a refund succeeded unless the status is refunded, and
never say it failed unless the status is failed. Calling issue_refund again with the same arguments
within 7 days never refunds twice: it answers with the refund already made.`

// NewServer returns an MCP server offering issue_refund and refund_status. One server may
// serve any number of sessions and transports.
func (t *Tools) NewServer() *mcp.Server {
	if t.Logger == nil {
		t.Logger = slog.New(slog.DiscardHandler)
	}
	s := mcp.NewServer(Implementation, &mcp.ServerOptions{Instructions: instructions, Logger: t.Logger})
	s.AddTool(issueRefundTool, t.issueRefund)
	s.AddTool(refundStatusTool, t.refundStatus)
	return s
}
