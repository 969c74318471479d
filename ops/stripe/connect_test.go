package stripe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// connected is the refund world with the adapter reading tenants' bindings from the store,
// as 'settle serve' wires it, and the tenant "shop" bound to acct_A.
func connected(t *testing.T) *world {
	t.Helper()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Adapter = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: w.Base, AttemptTimeout: time.Second, Accounts: w.DB})
	w.Refunds.Provider = w.Adapter
	if _, err := w.DB.SetStripeAccount(context.Background(), "shop", "acct_A", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	return w
}

// calls returns the fake's API calls as "METHOD path account" lines.
func calls(f *fake.Stripe) []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.Method+" "+c.Path+" "+c.Account)
	}
	return out
}

// TestBoundTenantRefundsInItsConnectedAccount: a tenant bound to acct_A refunds a payment
// of acct_A that carries no tenant label, through the refund tool, stripe-go and the fake;
// the payment read, the refund listing and the refund itself all carry Stripe-Account:
// acct_A, and the refund is made in acct_A.
func TestBoundTenantRefundsInItsConnectedAccount(t *testing.T) {
	t.Parallel()
	w := connected(t)
	if err := w.Fake.AddConnectedPaymentIntent("acct_A", "pi_conn", 5000, "usd"); err != nil {
		t.Fatal(err)
	}
	req := w.Req("conn-1")
	req.PaymentIntent, req.AmountCents = "pi_conn", 2000
	a, err := w.Refunds.Refund(context.Background(), req)
	if err != nil || a.Status != refund.Refunded {
		t.Fatalf("refund in the bound account: %+v %v", a, err)
	}
	rs := w.Fake.Refunds()
	if len(rs) != 1 || rs[0].Account != "acct_A" || rs[0].ID != a.RefundID || rs[0].Metadata[stripe.MetadataKey] != a.OperationID {
		t.Fatalf("the fake's ledger %+v, want one refund in acct_A carrying %s", rs, a.OperationID)
	}
	got := calls(w.Fake)
	for _, want := range []string{"GET /v1/payment_intents/pi_conn acct_A", "GET /v1/refunds acct_A", "POST /v1/refunds acct_A"} {
		if !contains(got, want) {
			t.Errorf("no %q among the calls %v", want, got)
		}
	}
	for _, c := range w.Fake.Calls() {
		if c.Account != "acct_A" {
			t.Errorf("a call for the bound tenant went elsewhere: %+v", c)
		}
	}
	// The refund left counts against the payment in its own account: the rest fits, more does not.
	more := w.Req("conn-2")
	more.PaymentIntent, more.AmountCents, more.OrderID = "pi_conn", 3001, "4418"
	if _, err := w.Refunds.Refund(context.Background(), more); ops.ErrorReason(err) != "amount_over_remainder" {
		t.Fatalf("over the remainder in acct_A: %v", err)
	}
}

// TestBoundTenantCannotRefundPlatformOrOtherAccountsPayments: the tenant bound to acct_A
// asks to refund a platform payment labelled with its own name and a payment of acct_B
// labelled with its name too. Both are answered exactly as a payment Stripe does not have
// (no amount, currency or refund count), nothing is sent, and each request is recorded as
// refused. An unbound tenant does not reach a connected account's payment either.
func TestBoundTenantCannotRefundPlatformOrOtherAccountsPayments(t *testing.T) {
	t.Parallel()
	w := connected(t)
	ctx := context.Background()
	if err := w.Fake.AddConnectedPaymentIntent("acct_B", "pi_b", 777_00, "usd", fake.OwnedBy("shop")); err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, pi := range []string{"pi_missing", story, "pi_b"} {
		r := w.Req("probe-" + pi)
		r.PaymentIntent, r.AmountCents = pi, 100
		_, err := w.Refunds.Refund(ctx, r)
		msg := ops.ErrorMessage(err)
		answers = append(answers, fmt.Sprintf("%s %s %s", ops.ErrorCode(err), ops.ErrorReason(err), strings.ReplaceAll(msg, pi, "PI")))
		if strings.Contains(msg, "3800") || strings.Contains(msg, "777") || strings.Contains(strings.ToLower(msg), "usd") {
			t.Fatalf("%s: the refusal tells the payment's amount or currency: %q", pi, msg)
		}
	}
	if answers[0] != answers[1] || answers[0] != answers[2] || !strings.HasPrefix(answers[0], "invalid unknown_payment") {
		t.Fatalf("a platform or another account's payment is answered unlike a missing one:\n%s", strings.Join(answers, "\n"))
	}
	bank, err := w.DB.EnsureTenant(ctx, "bank")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Fake.AddConnectedPaymentIntent("acct_A", "pi_a", 500, "usd", fake.OwnedBy("bank")); err != nil {
		t.Fatal(err)
	}
	probe := refund.Request{TenantID: bank.ID, Tenant: "bank", OrderID: "9", AmountCents: 100, Currency: "usd",
		PaymentIntent: "pi_a", RequestRef: "probe-bank"}
	if _, err := w.Refunds.Refund(ctx, probe); ops.ErrorReason(err) != "unknown_payment" {
		t.Fatalf("an unbound tenant refunded acct_A's payment labelled with its name: %v", err)
	}
	for _, c := range w.Fake.Calls() {
		if c.Method == "POST" {
			t.Fatalf("a refund was sent: %+v", c)
		}
	}
	if n := len(w.Fake.Refunds()); n != 0 || w.Count(t, `SELECT count(*) FROM operations`) != 0 {
		t.Fatalf("%d refunds made, %d operations opened", n, w.Count(t, `SELECT count(*) FROM operations`))
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND request_ref LIKE 'probe-%'`); n != 4 {
		t.Fatalf("%d refused requests recorded, want 4", n)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
