package refund

import (
	"strings"

	"github.com/settle-dev/settle/ops"
)

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
// is unknown it never says refunded or not, and a failed refund says no money was moved only
// while Settle holds none of made, the operation's refunds that took money (ops rule 12): a
// double refund of it, or the same refund seen to go through after all, is on its way.
func CustomerStatus(op *ops.Operation, made []ops.ProviderRecord) ops.CustomerStatus {
	of := ""
	if op.AmountCents > 0 {
		of = " of " + ops.FormatMoney(op.AmountCents, op.Currency)
	}
	a := answerOf(op)
	if a == Failed && len(made) > 0 {
		return ops.CustomerStatus{Known: true, Headline: madeHeadline, Sentence: MadeSentence(made)}
	}
	return ops.CustomerStatus{Known: op.Status.Final(), Headline: headlines[a], Sentence: Sentence(a, of)}
}

// madeHeadline is the headline of a failed refund of which another refund took money.
const madeHeadline = "This refund failed, but another refund of it was made: it is on its way"

// MadeSentence is what a customer is told of a refund that failed while Settle holds made,
// other refunds of the same operation, as having taken money: each is on its way, by amount
// and reference, and nothing is said of money not moved.
func MadeSentence(made []ops.ProviderRecord) string {
	parts := make([]string, len(made))
	for i, r := range made {
		parts[i] = ops.FormatMoney(r.AmountCents, r.Currency) + " (reference " + r.Ref + ")"
	}
	list := parts[len(parts)-1]
	if n := len(parts); n > 1 {
		list = strings.Join(parts[:n-1], ", ") + " and " + list
		return "Your refunds of " + list + " are on their way: the payment provider accepted them. We'll tell you in this chat if anything changes."
	}
	return "Your refund of " + list + " is on its way: the payment provider accepted it. We'll tell you in this chat if anything changes."
}

// headlines are the statuses in plain words for the support agent, by answer.
var headlines = map[string]string{
	Refunded:    "Refunded",
	Failed:      "Not refunded",
	Checking:    "Being checked: the outcome is not known yet",
	Unconfirmed: "In progress",
	Pending:     "Refund on its way: accepted, not yet settled by the bank",
}
