package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestRefundsOffRecordsTheRefusedRequests defends ops rule 8: every client request is
// recorded, refused ones included. A server without STRIPE_API_KEY answers the refund route
// with 503 (refunds are off) and still reads and checks each request first (422 for one
// that is incomplete); both named their tenant, so each is recorded once as that tenant's
// refused refund request, under its request reference, and nothing else is written.
func TestRefundsOffRecordsTheRefusedRequests(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{"SETTLE_RECONCILE_INTERVAL": "off"})
	_, token := shopToken(t, p)
	for _, c := range []struct {
		ref, body string
		want      int
	}{
		{"off-whole", `{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_off"}`, http.StatusServiceUnavailable},
		{"off-empty", `{}`, http.StatusUnprocessableEntity},
	} {
		req, err := http.NewRequest(http.MethodPost, p.URL()+"/api/v1/refunds", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Ref", c.ref)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("refund %s on a server without Stripe: %d, want %d", c.ref, resp.StatusCode, c.want)
		}
		var n int
		err = p.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM client_requests c JOIN tenants t ON t.id = c.tenant_id
WHERE t.name = 'shop' AND c.kind = 'refund' AND c.answer = 'rejected' AND c.request_ref = $1`, c.ref).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("refund %s refused on a server without Stripe recorded %d times (%v), want once", c.ref, n, err)
		}
	}
	var ops int
	if err := p.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations`).Scan(&ops); err != nil || ops != 0 {
		t.Errorf("%d operations (%v) after refunds refused on a server without Stripe, want none", ops, err)
	}
}
