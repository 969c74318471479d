package refund

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// Held is one refund as the provider holds it, read by its id, with the payment it refunds.
type Held struct {
	Record ops.ProviderRecord
	// PaymentRef is the payment the refund refunds, as the provider says.
	PaymentRef string
}

// RefundReader is a Provider that reads one refund by its id, in the account an operation
// was sent to, so that a refund id a person gives can be checked against what the provider
// holds. A refund the provider does not hold there is an ENOTFOUND; a provider that could
// not be asked is an EUNAVAILABLE.
type RefundReader interface {
	Refund(ctx context.Context, op *ops.Operation, ref string) (Held, error)
}
