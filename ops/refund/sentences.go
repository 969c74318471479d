package refund

import "github.com/settle-dev/settle/ops"

// The sentences a customer may be sent about a refund, one wording each, whichever way the
// question came (the support page, an operation's page, the MCP tool's answer, a
// notification).
const (
	// UnknownSentence is what a customer is told while the outcome is unknown.
	UnknownSentence = "We can't confirm your refund yet. A colleague is checking and will reply in this chat."
	// PendingSentence is what a customer is told while nobody has confirmed the refund yet
	// and nothing says it is in doubt.
	PendingSentence = "We can't confirm your refund yet; we are still waiting for the payment provider to answer. We'll confirm in this chat as soon as it's done."
)

// Sentence is the sentence for a refund whose answer (Refunded, Failed, Unconfirmed,
// Pending or Checking) is known; of names the amount (" of 38.00 USD") or is empty.
func Sentence(answer, of string) string {
	switch answer {
	case Refunded:
		return "Your refund" + of + " has been issued. It usually appears on your statement within 5 to 10 business days."
	case Failed:
		return "Your refund" + of + " did not go through, and no money was moved. A colleague will look into it and reply in this chat."
	case Unconfirmed:
		return PendingSentence
	case Pending:
		return "Your refund" + of + " is on its way: the payment provider accepted it and your bank is processing it. We'll tell you in this chat if anything changes."
	default:
		return UnknownSentence
	}
}

// answerOf is the refund tool's answer for an operation, as the sentences read it.
func answerOf(op *ops.Operation) string {
	switch op.Status {
	case ops.StatusSucceeded:
		if IsPending(op) {
			return Pending
		}
		return Refunded
	case ops.StatusFailed:
		return Failed
	case ops.StatusUnknown, ops.StatusExpired:
		return Checking
	}
	return Unconfirmed
}

// CustomerStatus turns a refund operation into the customer-facing truth. While the outcome
// is unknown it never says refunded or not (ops rule 12).
func CustomerStatus(op *ops.Operation) ops.CustomerStatus {
	of := ""
	if op.AmountCents > 0 {
		of = " of " + ops.FormatMoney(op.AmountCents, op.Currency)
	}
	a := answerOf(op)
	return ops.CustomerStatus{Known: op.Status.Final(), Headline: headlines[a], Sentence: Sentence(a, of)}
}

// headlines are the statuses in plain words for the support agent, by answer.
var headlines = map[string]string{
	Refunded:    "Refunded",
	Failed:      "Not refunded",
	Checking:    "Being checked: the outcome is not known yet",
	Unconfirmed: "In progress",
	Pending:     "Refund on its way: accepted, not yet settled by the bank",
}
