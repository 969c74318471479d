package web

import (
	"context"
	"net/http"

	"github.com/settle-dev/settle/ops"
)

// RefundTool is what the refund route needs: the domain's refund flow.
type RefundTool interface {
	Refund(ctx context.Context, req ops.RefundRequest) (ops.RefundAnswer, error)
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
	if err := decodeJSON(w, r, &b); err != nil {
		s.Error(w, r, err)
		return
	}
	if b.AmountCents == nil {
		s.Error(w, r, &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "amount_cents is required."})
		return
	}
	ans, err := s.Refunds.Refund(r.Context(), ops.RefundRequest{TenantID: tenant.ID, OrderID: b.OrderID,
		AmountCents: *b.AmountCents, Currency: b.Currency, PaymentIntent: b.PaymentIntent, Reason: b.Reason,
		RequestRef: firstNonEmpty(b.RequestRef, r.Header.Get("X-Request-Ref"))})
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
