package fake_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops/fake"
)

// TestConnectedAccountsSeeOnlyTheirObjects: a payment intent seeded in a connected account
// is found, refunded and listed only by requests carrying Stripe-Account with that account;
// the platform and another account get Stripe's 404, as for an id that does not exist. The
// refund and its webhook name the account, and the call log shows who asked what where.
func TestConnectedAccountsSeeOnlyTheirObjects(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test_connect"
	hookURL, got := webhookReceiver(t, secret, 0)
	s, url := start(t, fake.StripeOptions{WebhookURL: hookURL, WebhookSecret: secret})
	if err := s.AddConnectedPaymentIntent("acct_A1", "pi_conn", 5000, "usd"); err != nil {
		t.Fatal(err)
	}
	s.AddPaymentIntent("pi_plat", 3000, "usd")
	c := newClient(t, url, testKey, 5*time.Second)
	in := func(account string) *stripe.PaymentIntentParams {
		p := &stripe.PaymentIntentParams{}
		if account != "" {
			p.SetStripeAccount(account)
		}
		return p
	}
	if pi, err := c.PaymentIntents.Get("pi_conn", in("acct_A1")); err != nil || pi.Amount != 5000 {
		t.Fatalf("its own account: %+v %v", pi, err)
	}
	for _, acct := range []string{"", "acct_B2"} {
		if _, err := c.PaymentIntents.Get("pi_conn", in(acct)); stripeErr(t, err).HTTPStatusCode != 404 {
			t.Fatalf("account %q read another account's payment intent: %v", acct, err)
		}
	}
	if _, err := c.PaymentIntents.Get("pi_plat", in("acct_A1")); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatalf("a connected account read the platform's payment intent: %v", err)
	}

	wrong := refundParams("pi_conn", 100, "k-wrong")
	wrong.SetStripeAccount("acct_B2")
	if _, err := c.Refunds.New(wrong); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatalf("refund from another account: %v", err)
	}
	right := refundParams("pi_conn", 100, "k-right")
	right.SetStripeAccount("acct_A1")
	re, err := c.Refunds.New(right)
	if err != nil {
		t.Fatal(err)
	}
	if rs := s.Refunds(); len(rs) != 1 || rs[0].Account != "acct_A1" || rs[0].ID != re.ID {
		t.Fatalf("ledger %+v, want one refund in acct_A1", rs)
	}
	listIn := func(account string) int {
		p := &stripe.RefundListParams{}
		if account != "" {
			p.SetStripeAccount(account)
		}
		n := 0
		for it := c.Refunds.List(p); it.Next(); {
			n++
		}
		return n
	}
	if a, plat, b := listIn("acct_A1"), listIn(""), listIn("acct_B2"); a != 1 || plat != 0 || b != 0 {
		t.Fatalf("listed %d in acct_A1, %d in the platform, %d in acct_B2; want 1, 0, 0", a, plat, b)
	}
	other := &stripe.RefundParams{}
	other.SetStripeAccount("acct_B2")
	if _, err := c.Refunds.Get(re.ID, other); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatalf("another account read the refund: %v", err)
	}

	// Its events say which account they happened in.
	for range 2 {
		if ev := waitEvent(t, got); ev.Account != "acct_A1" {
			t.Fatalf("event %s carries account %q, want acct_A1", ev.Type, ev.Account)
		}
	}
	bad := in("not-an-account")
	if _, err := c.PaymentIntents.Get("pi_conn", bad); stripeErr(t, err).HTTPStatusCode != 403 {
		t.Fatalf("a malformed Stripe-Account: %v, want 403", err)
	}
	seen := map[string]bool{}
	for _, call := range s.Calls() {
		seen[call.Method+" "+call.Path+" "+call.Account] = true
	}
	for _, want := range []string{"GET /v1/payment_intents/pi_conn acct_A1", "POST /v1/refunds acct_A1", "GET /v1/refunds acct_A1",
		"POST /v1/refunds acct_B2", "GET /v1/payment_intents/pi_conn "} {
		if !seen[want] {
			t.Errorf("the call log lacks %q: %v", want, s.Calls())
		}
	}
}

// TestAdminSeedsInAConnectedAccount: POST /_fake/payment_intents takes an account, refuses a
// malformed one, and the seeded intent is that account's only.
func TestAdminSeedsInAConnectedAccount(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	post := func(body string) int {
		resp, err := http.Post(url+"/_fake/payment_intents", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"account":"acct_Z9","id":"pi_z","amount":700,"currency":"eur"}`); code != http.StatusCreated {
		t.Fatalf("seed in acct_Z9: %d", code)
	}
	if code := post(`{"account":"acct_bad-id","id":"pi_y","amount":700,"currency":"eur"}`); code != http.StatusBadRequest {
		t.Fatalf("seed in a malformed account: %d, want 400", code)
	}
	if code := post(`{"id":"pi_z","amount":700,"currency":"eur"}`); code != http.StatusConflict {
		t.Fatalf("the same id in the platform: %d, want 409", code)
	}
	if err := s.AddConnectedPaymentIntent("", "pi_x", 100, "usd"); err == nil {
		t.Fatal("AddConnectedPaymentIntent took the platform account")
	}
	c := newClient(t, url, testKey, 5*time.Second)
	p := &stripe.PaymentIntentParams{}
	p.SetStripeAccount("acct_Z9")
	if pi, err := c.PaymentIntents.Get("pi_z", p); err != nil || pi.Currency != "eur" {
		t.Fatalf("read in acct_Z9: %+v %v", pi, err)
	}
}
