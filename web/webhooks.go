package web

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/settle-dev/settle/ops"
)

// WebhookReceiver verifies and applies one provider webhook.
type WebhookReceiver interface {
	Receive(ctx context.Context, payload []byte, signature string) (ops.Applied, error)
}

// handleStripeWebhook applies a signed Stripe event once. A bad signature is 401 and
// changes nothing; a replayed event, one from another account than the one its
// operation's tenant is bound to (foreign_account), and one naming an operation of another
// provider (foreign_provider), is answered 200, so Stripe stops resending it, and changes
// nothing. An event that a refund failed, naming an operation being sent right now, is
// answered 409 in_flight and not recorded, so Stripe delivers it again after the send.
func (s *Server) handleStripeWebhook(w http.ResponseWriter, r *http.Request) {
	if s.StripeWebhooks == nil {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "Stripe webhooks are not configured."))
		return
	}
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.Error(w, r, &ops.Error{Code: ETOOLARGE, Reason: "body_too_large", Message: fmt.Sprintf("The body is over %d bytes.", maxBody)})
		return
	}
	res, err := s.StripeWebhooks.Receive(r.Context(), payload, r.Header.Get("Stripe-Signature"))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"outcome": res.Outcome})
}
