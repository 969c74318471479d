package stripe_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	stripelib "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund/refundtest"
	"github.com/settle-dev/settle/ops/stripe"
)

// world is the refund tool wired for real (package refundtest).
type world = refundtest.World

const story = refundtest.Story

func newWorld(t *testing.T, attemptTimeout, deadline time.Duration) *world {
	t.Helper()
	return refundtest.New(t, attemptTimeout, deadline)
}

func TestClassifyEveryStripeAnswer(t *testing.T) {
	cases := []struct {
		err    error
		header http.Header
		want   ops.Outcome
	}{
		{&stripelib.Error{HTTPStatusCode: 409, Code: stripelib.ErrorCodeIdempotencyKeyInUse, Type: stripelib.ErrorTypeIdempotency}, nil, ops.OutcomeKeyInUse},
		{&stripelib.Error{HTTPStatusCode: 400, Type: stripelib.ErrorTypeIdempotency}, nil, ops.OutcomeServerError},
		{&stripelib.Error{HTTPStatusCode: 429, Type: stripelib.ErrorTypeInvalidRequest}, http.Header{"Retry-After": {"3"}}, ops.OutcomeRateLimited},
		{&stripelib.Error{HTTPStatusCode: 500, Type: stripelib.ErrorTypeAPI}, nil, ops.OutcomeServerError},
		{&stripelib.Error{HTTPStatusCode: 503, Type: stripelib.ErrorTypeAPI}, http.Header{"Stripe-Should-Retry": {"true"}}, ops.OutcomeTimeout},
		{&stripelib.Error{HTTPStatusCode: 400, Code: stripelib.ErrorCodeChargeAlreadyRefunded, Type: stripelib.ErrorTypeInvalidRequest}, nil, ops.OutcomeInvalid},
		{&stripelib.Error{HTTPStatusCode: 402, Type: stripelib.ErrorTypeCard}, nil, ops.OutcomeInvalid},
		{&stripelib.Error{HTTPStatusCode: 401, Type: stripelib.ErrorTypeInvalidRequest}, nil, ops.OutcomeInvalid},
		{context.DeadlineExceeded, nil, ops.OutcomeTimeout},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, nil, ops.OutcomeNotSent},
		{io.ErrUnexpectedEOF, nil, ops.OutcomeTimeout},
	}
	for _, c := range cases {
		got := stripe.Classify(c.err, c.header)
		if got.Outcome != c.want {
			t.Errorf("%v: %s, want %s", c.err, got.Outcome, c.want)
		}
	}
	if r := stripe.Classify(cases[2].err, cases[2].header); r.RetryAfter != 3*time.Second {
		t.Errorf("Retry-After read as %v", r.RetryAfter)
	}
}

// TestOneTenantsReadsCannotDelayAnothersRefund: one tenant fires many remainder checks at
// once; another tenant's refund still reads what it needs within its own call's deadline,
// because each tenant has its own share of the account's Stripe reads.
func TestOneTenantsReadsCannotDelayAnothersRefund(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	a := stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: w.Base, ReadsPerSecond: 10, TenantReadsPerSecond: 4})
	noisy, quiet := int64(101), int64(102)
	// The flood would take 30 reads at 4 a second to drain; once the quiet tenant's read is
	// answered nothing more is learnt from it, so it is called off then.
	flood, stopFlood := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopFlood()
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = a.Payment(flood, noisy, story)
		}()
	}
	time.Sleep(50 * time.Millisecond) // the flood has queued
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p, err := a.Payment(ctx, quiet, story)
	stopFlood()
	wg.Wait()
	if err != nil || p.AmountCents != 3800 {
		t.Fatalf("the quiet tenant's read within its deadline: %+v %v", p, err)
	}
}
