package web

import (
	"context"
	"net/http"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// RefundTool is what the refund route needs: the domain's refund flow.
type RefundTool interface {
	Refund(ctx context.Context, req refund.Request) (refund.Answer, error)
	// Refuse records a request refused before it could be read and returns its answer: the
	// refusal, or the outage that kept it from being recorded.
	Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error
}

// refundBody is the JSON of POST /api/v1/refunds. Amounts are whole cents: a JSON number
// with a fraction does not decode into int64 and is refused.
type refundBody struct {
	OrderID       string `json:"order_id"`
	AmountCents   *int64 `json:"amount_cents"`
	Currency      string `json:"currency"`
	PaymentIntent string `json:"payment_intent"`
	Reason        string `json:"reason"`
	RequestRef    string `json:"request_ref"`
}

// handleRefund performs a refund at most once per intent and answers with the truth:
// refunded, unconfirmed, checking or failed, always as 200; refusals are problems.
func (s *Server) handleRefund(w http.ResponseWriter, r *http.Request) {
	tenant := tenantFrom(r.Context())
	var b refundBody
	err := decodeJSON(w, r, &b)
	if err == nil && b.AmountCents == nil {
		err = &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "amount_cents is required."}
	}
	ref, rerr := requestRef(r, b.RequestRef)
	if err == nil {
		err = rerr
	}
	if err != nil {
		s.Error(w, r, s.Refunds.Refuse(r.Context(), tenant.ID, ops.CleanRef(ref), err))
		return
	}
	ans, err := s.Refunds.Refund(r.Context(), refund.Request{TenantID: tenant.ID, Tenant: tenant.Name, OrderID: b.OrderID,
		AmountCents: *b.AmountCents, Currency: b.Currency, PaymentIntent: b.PaymentIntent, Reason: b.Reason,
		RequestRef: ref})
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ans)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
