package stripe_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/stripe"
)

const stripeMockVersion = "v0.203.0"

// stripeMock finds stripe-mock. Tests never install it (`make deps` does): when it is
// missing the test skips, or fails under SETTLE_TEST_STRICT=1, as in CI, where request
// shapes are never left unchecked silently.
func stripeMock(t *testing.T) string {
	t.Helper()
	return testtool.Need(t, "stripe-mock", "go install github.com/stripe/stripe-mock@"+stripeMockVersion+" (or make deps)", testtool.GoBin())
}

func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMock(t)
	addr, tlsAddr := proctest.FreeAddr(t), proctest.FreeAddr(t)
	// No -strict-version-check: stripe-mock bundles a newer API version than stripe-go v76
	// pins; the refund, payment intent and list shapes we use are the same in both.
	proctest.Start(t, "stripe-mock", exec.Command(bin, "-http-addr", addr, "-https-addr", tlsAddr)).WaitDial(t, addr, 10*time.Second)
	return "http://" + addr
}

// TestRequestShapesPassStripesOwnValidation sends every request the adapter makes to
// stripe-mock, which validates them against Stripe's OpenAPI specification.
func TestRequestShapesPassStripesOwnValidation(t *testing.T) {
	base := startStripeMock(t)
	a := stripe.New(stripe.Config{APIKey: "sk_test_123", BaseURL: base, AttemptTimeout: 5 * time.Second})
	ctx := context.Background()
	op := &ops.Operation{ID: "01935f6e-0000-7000-8000-000000000001", PaymentRef: "pi_123", AmountCents: 3800, Currency: "usd",
		ProviderKey: "settle_0123456789abcdef", Request: []byte(`{"reason":"requested_by_customer"}`)}
	res := a.Send(ctx, op, &ops.Attempt{N: 1, ProviderKey: op.ProviderKey})
	if res.Outcome != ops.OutcomeOK || res.Result == nil || !strings.HasPrefix(res.Result.ProviderRef, "re_") {
		t.Fatalf("create refund refused by stripe-mock: %+v", res)
	}
	if _, err := a.Payment(ctx, 1, "pi_123"); err != nil {
		t.Fatalf("payment intent and refund list refused: %v", err)
	}
	if _, err := a.Lookup(ctx, op); err != nil {
		t.Fatalf("lookup refused: %v", err)
	}
	now := time.Now()
	if err := a.ListRefunds(ctx, now.Add(-24*time.Hour), now, func([]ops.ProviderRecord) error { return nil }); err != nil {
		t.Fatalf("list by creation window refused: %v", err)
	}
	// The check has teeth: a request Stripe's schema rejects comes back as a refusal.
	bad := *op
	bad.AmountCents = -5
	bad.Request = []byte(`{"reason":"not_a_reason"}`)
	if res := a.Send(ctx, &bad, &ops.Attempt{N: 1}); res.Outcome != ops.OutcomeInvalid {
		t.Fatalf("stripe-mock accepted a malformed refund: %+v", res)
	}
	fmt.Fprintln(os.Stderr, "stripe-mock", stripeMockVersion, "accepted every request shape")
}
