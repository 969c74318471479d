package desk

import (
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// CustomerStatus is what support may tell a customer about an operation, in plain words.
type CustomerStatus struct {
	// Headline is the status for the support agent.
	Headline string
	// Sentence is the exact sentence to send to the customer.
	Sentence string
	// Known is false while the outcome is not known: then nobody says succeeded or failed.
	Known bool
}

// The sentences a customer may be sent about a refund, one wording each, whichever way the
// question came (the support page, an operation's page, the MCP tool's answer).
const (
	// UnknownRefundSentence is what a customer is told while the outcome is unknown.
	UnknownRefundSentence = "We can't confirm your refund yet. A colleague is checking and will reply in this chat."
	// PendingRefundSentence is what a customer is told while nobody has confirmed the
	// refund yet and nothing says it is in doubt.
	PendingRefundSentence = "We can't confirm your refund yet; we are still waiting for the payment provider to answer. We'll confirm in this chat as soon as it's done."
)

// RefundSentence is the sentence for a refund whose answer (refund.Refunded, Failed,
// Unconfirmed or Checking) is known; of names the amount (" of 38.00 USD") or is empty.
func RefundSentence(answer, of string) string {
	switch answer {
	case refund.Refunded:
		return "Your refund" + of + " has been issued. It usually appears on your statement within 5 to 10 business days."
	case refund.Failed:
		return "Your refund" + of + " did not go through, and no money was moved. A colleague will look into it and reply in this chat."
	case refund.Unconfirmed:
		return PendingRefundSentence
	case refund.Pending:
		return "Your refund" + of + " is on its way: the payment provider accepted it and your bank is processing it. We'll tell you in this chat if anything changes."
	default:
		return UnknownRefundSentence
	}
}

// refundAnswerOf is the refund tool's answer for an operation, as the sentences read it.
func refundAnswerOf(op *ops.Operation) string {
	switch op.Status {
	case ops.StatusSucceeded:
		if refund.IsPending(op) {
			return refund.Pending
		}
		return refund.Refunded
	case ops.StatusFailed:
		return refund.Failed
	case ops.StatusUnknown, ops.StatusExpired:
		return refund.Checking
	}
	return refund.Unconfirmed
}

// CustomerStatusOf turns an operation into the customer-facing truth. While the outcome is
// unknown it never says succeeded or failed.
func CustomerStatusOf(op *ops.Operation) CustomerStatus {
	if op.Kind == ops.KindRefund {
		of := ""
		if op.AmountCents > 0 {
			of = " of " + ops.FormatMoney(op.AmountCents, op.Currency)
		}
		return CustomerStatus{Known: op.Status.Final(), Headline: headlines[refundAnswerOf(op)],
			Sentence: RefundSentence(refundAnswerOf(op), of)}
	}
	switch op.Status {
	case ops.StatusSucceeded:
		return CustomerStatus{Known: true, Headline: "Completed", Sentence: "Your request has been completed."}
	case ops.StatusFailed:
		return CustomerStatus{Known: true, Headline: "Did not go through",
			Sentence: "Your request did not go through. A colleague will look into it and reply in this chat."}
	case ops.StatusUnknown, ops.StatusExpired:
		return CustomerStatus{Headline: headlines[refund.Checking],
			Sentence: "We can't confirm your request yet. A colleague is checking and will reply in this chat."}
	default:
		return CustomerStatus{Headline: "In progress",
			Sentence: "Your request is being processed. We'll confirm in this chat as soon as it's done."}
	}
}

// headlines are the statuses in plain words for the support agent, by refund answer.
var headlines = map[string]string{
	refund.Refunded:    "Refunded",
	refund.Failed:      "Not refunded",
	refund.Checking:    "Being checked: the outcome is not known yet",
	refund.Unconfirmed: "In progress",
	refund.Pending:     "Refund on its way: accepted, not yet settled by the bank",
}
