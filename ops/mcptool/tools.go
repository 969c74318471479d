package mcptool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// The id formats of refund.Request.Validate, repeated in the input schemas so a client
// can check arguments before it calls. Validate stays the authority: the tools call it
// through refund.Tool exactly as the HTTP route does (a test keeps the two in step).
const (
	orderPattern     = `^[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,63}$`
	paymentPattern   = `^pi_[A-Za-z0-9_]{1,250}$`
	currencyPattern  = `^[A-Za-z]{3}$`
	operationPattern = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
)

var operationRe = regexp.MustCompile(operationPattern)

// The customer sentences, one per answer, worded once for every path by the refund tool.
var (
	// CustomerChecking is the sentence while an outcome is unknown, as in the refund
	// agent's timeout then try again.
	CustomerChecking    = refund.Sentence(refund.Checking, "")
	CustomerRefunded    = refund.Sentence(refund.Refunded, "")
	CustomerUnconfirmed = refund.Sentence(refund.Unconfirmed, "")
	CustomerFailed      = refund.Sentence(refund.Failed, "")
	CustomerPending     = refund.Sentence(refund.Pending, "")
)

// unknownNote is refund_status's note when Settle has no such refund for the caller.
const unknownNote = "Settle has no refund with this id for your account. Do not say the refund succeeded or failed; tell the customer a colleague is checking."

// Answer is a tool's structured result: the JSON answer of POST /api/v1/refunds, plus the
// one sentence the model may pass on to the customer.
type Answer struct {
	refund.Answer
	CustomerMessage string `json:"customer_message"`
}

func ptr[T any](v T) *T { return &v }

// closed is an object schema that refuses properties it does not list.
func closed(required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Required: required, Properties: props,
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
}

var (
	orderSchema = &jsonschema.Schema{Type: "string", Pattern: orderPattern, MinLength: ptr(1), MaxLength: ptr(64),
		Description: "The shop's order id, exactly as the customer or the order system gives it (1-64 letters, digits or _.:#/-), e.g. \"4417\"."}
	amountSchema = &jsonschema.Schema{Type: "integer", Minimum: ptr(1.0), Maximum: ptr(float64(refund.MaxCents)),
		Description: "The amount to refund in the currency's smallest unit, as a whole number: 3800 for $38.00, 500 for ¥500. Not a decimal."}
	currencySchema = &jsonschema.Schema{Type: "string", Pattern: currencyPattern, MinLength: ptr(3), MaxLength: ptr(3),
		Description: "Three-letter ISO currency code of the payment, e.g. \"usd\"."}
	operationSchema = &jsonschema.Schema{Type: "string", Pattern: operationPattern,
		Description: "The operation_id an earlier issue_refund answer gave."}
)

var issueRefundTool = &mcp.Tool{
	Name:  "issue_refund",
	Title: "Issue a refund",
	Description: `Refund (part of) a customer's card payment for an order, at most once.

Settle records the refund before it contacts the payment provider and always resends it with the same
key, so calling issue_refund again with the same order_id, amount_cents and currency NEVER refunds
twice: it returns the answer of the refund already made or still under way. Calling again is the right
thing to do when the customer asks you to "try again".

The answer's status says what you may tell the customer; pass on customer_message:
- "refunded": the provider confirmed the refund (refund_id). Tell the customer it was issued.
- "refund_pending": the provider accepted the refund (refund_id) and it is on its way, but the bank has
  not settled it yet and it may still fail. Tell the customer it is on its way, not that it arrived.
- "unconfirmed": the provider has not answered yet (for example it timed out). The refund may or may
  not have happened. Do NOT say it succeeded or failed. It is safe to call issue_refund again with the
  same arguments, now or when the customer asks again.
- "checking": nobody knows the outcome and a person is checking it. Do NOT say it succeeded or failed;
  tell the customer a colleague is checking and will reply in this chat. Calling again will not help.
- "failed": the provider refused it and nothing was refunded (reason). Tell the customer the refund
  could not be made; do not call again unless a person asks you to.

Arguments that break the rules below are refused before anything starts, with a message naming the
argument to fix; nothing is refunded by a refused call.`,
	// Not marked destructive-free: it moves money, and clients may well ask a person first.
	Annotations: &mcp.ToolAnnotations{Title: "Issue a refund", IdempotentHint: true, OpenWorldHint: ptr(true)},
	InputSchema: closed([]string{"order_id", "amount_cents", "currency", "payment_intent"}, map[string]*jsonschema.Schema{
		"order_id":     orderSchema,
		"amount_cents": amountSchema,
		"currency":     currencySchema,
		"payment_intent": {Type: "string", Pattern: paymentPattern, MaxLength: ptr(253),
			Description: "The Stripe PaymentIntent the order was paid with, \"pi_\" followed by letters, digits or _."},
		"reason": {Type: "string", Enum: []any{"requested_by_customer", "duplicate", "fraudulent"},
			Description: "Why the refund is made; usually requested_by_customer."},
	}),
	OutputSchema: answerSchema,
}

var refundStatusTool = &mcp.Tool{
	Name:  "refund_status",
	Title: "Check a refund",
	Description: `Look up the current status of a refund asked for earlier, without sending anything to the payment
provider. Pass the operation_id from an issue_refund answer, or the order_id (with the same amount_cents
and currency you passed to issue_refund when the order may have several refunds).

The status means the same as in issue_refund: "refunded" (confirmed), "refund_pending" (accepted and on its
way, not yet settled by the bank; it may still fail), "unconfirmed" (no answer yet; calling
issue_refund again with the same arguments is safe), "checking" (a person is checking; do not say it
succeeded or failed), "failed" (refused, nothing refunded). A refund Settle has no record of is answered
"checking": do not guess, tell the customer a colleague is checking.`,
	Annotations: &mcp.ToolAnnotations{Title: "Check a refund", ReadOnlyHint: true, IdempotentHint: true},
	InputSchema: closed(nil, map[string]*jsonschema.Schema{
		"operation_id": operationSchema,
		"order_id":     orderSchema,
		"amount_cents": amountSchema,
		"currency":     currencySchema,
	}),
	OutputSchema: answerSchema,
}

var answerSchema = &jsonschema.Schema{Type: "object", Required: []string{"status", "operation_id", "customer_message"},
	Properties: map[string]*jsonschema.Schema{
		"status":           {Type: "string", Enum: []any{refund.Refunded, refund.Pending, refund.Unconfirmed, refund.Checking, refund.Failed}},
		"operation_id":     {Type: "string", Description: "Settle's id of the refund; pass it to refund_status."},
		"refund_id":        {Type: "string", Description: "The provider's refund id, when refunded or refund_pending."},
		"reason":           {Type: "string", Description: "Why it failed, when failed."},
		"note":             {Type: "string", Description: "What the status means for you."},
		"customer_message": {Type: "string", Description: "The sentence you may pass on to the customer."},
	}}

// refundArgs are issue_refund's arguments. The amount is a pointer so a missing one is told
// apart from zero.
type refundArgs struct {
	OrderID       string `json:"order_id"`
	AmountCents   *int64 `json:"amount_cents"`
	Currency      string `json:"currency"`
	PaymentIntent string `json:"payment_intent"`
	Reason        string `json:"reason"`
}

type statusArgs struct {
	OperationID string `json:"operation_id"`
	OrderID     string `json:"order_id"`
	AmountCents *int64 `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// issueRefund performs the refund through refund.Tool, the code path of the HTTP route.
func (t *Tools) issueRefund(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tenant, err := t.Tenant(ctx, req)
	if err != nil {
		return refused("issue_refund", err), nil
	}
	ref := RequestRef(req)
	var a refundArgs
	err = decodeArgs(req.Params.Arguments, &a, refundArgNames)
	if err == nil && a.AmountCents == nil {
		err = &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "amount_cents is required."}
	}
	if err != nil {
		return refused("issue_refund", t.Refunds.Refuse(ctx, tenant.ID, ref, err)), nil
	}
	ans, err := t.Refunds.Refund(ctx, refund.Request{TenantID: tenant.ID, Tenant: tenant.Name, OrderID: a.OrderID, AmountCents: *a.AmountCents,
		Currency: a.Currency, PaymentIntent: a.PaymentIntent, Reason: a.Reason, RequestRef: ref})
	if err != nil {
		if ops.ErrorCode(err) == ops.EINTERNAL {
			t.Logger.ErrorContext(ctx, "issue_refund", "err", err, "request_ref", ref)
		}
		return refused("issue_refund", err), nil
	}
	return answered(ans), nil
}

// refundStatus reports a refund's status from the ledger; it never contacts the provider.
func (t *Tools) refundStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tenant, err := t.Tenant(ctx, req)
	if err != nil {
		return refused("refund_status", err), nil
	}
	var a statusArgs
	if err := decodeArgs(req.Params.Arguments, &a, statusArgNames); err != nil {
		return refused("refund_status", err), nil
	}
	op, err := t.findRefund(ctx, tenant.ID, a)
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		// Not knowing a refund is not knowing its outcome: the model must not guess.
		return answered(refund.Answer{Status: refund.Checking, OperationID: a.OperationID, Note: unknownNote}), nil
	}
	if err != nil {
		if ops.ErrorCode(err) == ops.EINTERNAL {
			t.Logger.ErrorContext(ctx, "refund_status", "err", err)
		}
		return refused("refund_status", err), nil
	}
	ans, err := t.answer(ctx, op)
	if err != nil {
		t.Logger.ErrorContext(ctx, "refund_status", "err", err)
		return refused("refund_status", err), nil
	}
	return answered(ans), nil
}

func (t *Tools) findRefund(ctx context.Context, tenantID int64, a statusArgs) (*ops.Operation, error) {
	switch {
	case a.OperationID != "":
		if !operationRe.MatchString(a.OperationID) {
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: "operation_id must be the operation_id of an issue_refund answer, a UUID such as 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b."}
		}
		op, err := t.Status.Get(ctx, strings.ToLower(a.OperationID))
		if err == nil && (op.TenantID != tenantID || !refund.Kind().Of(op)) {
			// Another tenant's operation does not exist for this caller.
			return nil, ops.Errorf(ops.ENOTFOUND, "No refund %s.", a.OperationID)
		}
		return op, err
	case a.OrderID == "":
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "Pass operation_id, or order_id (with amount_cents and currency)."}
	case a.AmountCents != nil || a.Currency != "":
		// The intent, exactly as issue_refund keys it; Validate checks and normalises it.
		probe := refund.Request{TenantID: tenantID, OrderID: a.OrderID, Currency: a.Currency, PaymentIntent: "pi_status"}
		if a.AmountCents != nil {
			probe.AmountCents = *a.AmountCents
		}
		if err := probe.Validate(); err != nil {
			return nil, err
		}
		return t.Status.LatestForIntent(ctx, tenantID, ops.KindRefund, refund.IntentKey(probe.OrderID, probe.AmountCents, probe.Currency))
	default:
		f, ok := t.Status.(OrderFinder)
		if !ok {
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "Also pass amount_cents and currency, the same as in issue_refund, or pass operation_id."}
		}
		probe := refund.Request{TenantID: tenantID, OrderID: a.OrderID, AmountCents: 1, Currency: "usd", PaymentIntent: "pi_status"}
		if err := probe.Validate(); err != nil {
			return nil, err
		}
		op, intents, err := f.LatestRefundForOrder(ctx, tenantID, a.OrderID)
		if err == nil && intents > 1 {
			// The newest refund of the order says nothing of its others: answering with it
			// could tell a customer nothing was refunded when another refund went through
			// (ops rule 12).
			return nil, &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: fmt.Sprintf(
				"Order %s has %d refunds of different amounts: also pass amount_cents and currency, the same as in issue_refund, or pass operation_id.", a.OrderID, intents)}
		}
		return op, err
	}
}

// answer says what an operation's status allows, exactly as refund.Tool answers a call.
func (t *Tools) answer(ctx context.Context, op *ops.Operation) (refund.Answer, error) {
	return refund.AnswerFor(ctx, t.Status, op)
}

// answered is a tool result: the structured answer and one line for the model.
func answered(a refund.Answer) *mcp.CallToolResult {
	out := Answer{Answer: a, CustomerMessage: customerMessage(a)}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: Line(a)}},
		StructuredContent: out,
	}
}

// customerMessage is the sentence for a, the one /support shows for its operation.
func customerMessage(a refund.Answer) string {
	switch a.Status {
	case refund.Refunded:
		return CustomerRefunded
	case refund.Pending:
		return CustomerPending
	case refund.Failed:
		if len(a.OtherRefunds) > 0 {
			return refund.MadeSentence(a.Made())
		}
		return CustomerFailed
	case refund.Unconfirmed:
		return CustomerUnconfirmed
	default:
		return CustomerChecking
	}
}

// Line is the one-line text of an answer, written for the model.
func Line(a refund.Answer) string {
	op := ""
	if a.OperationID != "" {
		op = " (operation " + a.OperationID + ")"
	}
	switch a.Status {
	case refund.Refunded:
		return fmt.Sprintf("refunded%s: the provider confirmed refund %s; you may tell the customer the refund was issued.", op, a.RefundID)
	case refund.Pending:
		return fmt.Sprintf("refund_pending%s: the provider accepted refund %s and it is on its way, but the bank has not settled it; tell the customer it is on its way, not that it arrived.", op, a.RefundID)
	case refund.Unconfirmed:
		return "unconfirmed" + op + ": the provider has not confirmed the refund yet; do not say it succeeded or failed. Calling issue_refund again with the same arguments within 7 days is safe: it answers with this refund and never refunds twice."
	case refund.Failed:
		if len(a.OtherRefunds) > 0 {
			return fmt.Sprintf("failed%s: this refund moved no money (%s), but another refund of the same request was made and is on its way (other_refunds); tell the customer that one is on its way, not that no money moved, and do not refund again.", op, a.Reason)
		}
		if a.Reason == refund.ReasonFailedAfterSuccess {
			return fmt.Sprintf("failed%s: the provider accepted the refund, then it failed (%s), and nothing was refunded; tell the customer it did not go through after all.", op, a.Reason)
		}
		return fmt.Sprintf("failed%s: the provider refused the refund (%s) and nothing was refunded; tell the customer it could not be made.", op, a.Reason)
	default:
		return "checking" + op + ": the outcome is unknown and a person is checking; do not say the refund succeeded or failed. Tell the customer: \"" + CustomerChecking + "\""
	}
}

// refused is a tool error the model can act on: what was wrong, and that nothing happened
// or that calling again is safe. Internal details never reach the model.
func refused(tool string, err error) *mcp.CallToolResult {
	r := &mcp.CallToolResult{}
	r.SetError(errors.New(refusalText(tool, err)))
	return r
}

// refusalText is the message of refused.
func refusalText(tool string, err error) string {
	var msg string
	switch code := ops.ErrorCode(err); {
	case ops.Unreachable(err):
		// The refund flow said whether this call sent anything (ops rule 12).
		msg = fmt.Sprintf("%s could not finish: %s Do not say the refund succeeded or failed; wait %d seconds before calling again, or tell the customer a colleague will handle it.",
			tool, ops.ErrorMessage(err), int(ops.RetryAfterUnavailable/time.Second))
	case code == ops.EINVALID:
		msg = fmt.Sprintf("%s refused the arguments (%s): %s This call sent nothing to the payment provider; fix the argument and call again. Do not tell the customer whether the refund was made.", tool, ops.ErrorReason(err), ops.ErrorMessage(err))
	case code == ops.EUNAUTHORIZED || code == ops.EFORBIDDEN:
		msg = fmt.Sprintf("%s is not allowed: %s This call sent nothing to the payment provider. Tell the customer a colleague will handle the refund.", tool, ops.ErrorMessage(err))
	case code == ops.EUNAVAILABLE:
		msg = fmt.Sprintf("%s is unavailable: %s This call sent nothing to the payment provider. Do not say the refund succeeded or failed; try again later or tell the customer a colleague will handle it.", tool, ops.ErrorMessage(err))
	default:
		msg = fmt.Sprintf("%s could not finish (%s). Do not say the refund succeeded or failed. Calling again with the same arguments within 7 days is safe and never refunds twice; if it keeps failing, tell the customer: \"%s\"", tool, code, CustomerChecking)
	}
	return msg
}
