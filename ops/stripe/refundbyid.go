package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

var _ refund.RefundReader = (*Adapter)(nil)

// Refund implements refund.RefundReader: the refund ref as Stripe holds it in the account
// op was sent to, within op's tenant's share of reads. Another account's refund is as
// missing as one that does not exist.
func (a *Adapter) Refund(ctx context.Context, op *ops.Operation, ref string) (refund.Held, error) {
	account, err := a.opAccount(ctx, op)
	if err != nil {
		return refund.Held{}, err
	}
	if err := a.read(ctx, op.TenantID); err != nil {
		return refund.Held{}, err
	}
	p := &stripego.RefundParams{}
	p.Context = ctx
	if account != "" {
		p.SetStripeAccount(account)
	}
	r, err := a.api.Refunds.Get(ref, p)
	if err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
			return refund.Held{}, &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("Stripe holds no refund %s.", ref), Err: err}
		}
		return refund.Held{}, &ops.Error{Code: ops.EUNAVAILABLE, Message: "Stripe could not be asked about the refund; try again shortly.", Err: err}
	}
	rec := Record(r)
	rec.Account = account
	h := refund.Held{Record: rec}
	if r.PaymentIntent != nil {
		h.PaymentRef = r.PaymentIntent.ID
	}
	return h, nil
}
