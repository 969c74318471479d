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
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// world is the refund tool wired for real: Postgres, stripe-go, and the fake Stripe over
// loopback. Here it drives the adapter's connected accounts; the refund flow's own tests,
// on the same wiring, are in ops/refund.
type world struct {
	db      *pg.DB
	clock   *ops.ManualClock
	fake    *fake.Stripe
	base    string
	adapter *stripe.Adapter
	refunds *refund.Tool
	tenant  int64
}

const story = "pi_4417"

func newWorld(t *testing.T, attemptTimeout, deadline time.Duration) *world {
	t.Helper()
	db := pgtest.New(t)
	w := &world{db: db, clock: ops.NewManualClock(time.Now().UTC())}
	w.fake = fake.NewStripe(fake.StripeOptions{Clock: w.clock.Now, Seed: 1})
	base, err := w.fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.fake.Close() })
	w.base = base
	w.fake.AddPaymentIntent(story, 3800, "usd", fake.OwnedBy("shop"))
	w.adapter = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: base, AttemptTimeout: attemptTimeout})
	ledger := ops.NewLedger(db, w.clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	w.refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: w.adapter, Deadline: deadline}
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&w.tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) req(ref string) refund.Request {
	return refund.Request{TenantID: w.tenant, Tenant: "shop", OrderID: "4417", AmountCents: 3800, Currency: "usd",
		PaymentIntent: story, Reason: "requested_by_customer", RequestRef: ref}
}

func (w *world) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := w.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
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
	a := stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: w.base, ReadsPerSecond: 10, TenantReadsPerSecond: 4})
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
