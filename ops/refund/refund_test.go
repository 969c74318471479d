package refund_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	stripelib "github.com/stripe/stripe-go/v76"
	stripego "github.com/stripe/stripe-go/v76/client"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
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

// The refund agent's timeout then try again: the first call times out while Stripe commits
// the refund; the customer says "try again"; the second call reuses the key and gets the
// stored refund.
func TestSeedStoryTimeoutThenTryAgain(t *testing.T) {
	t.Parallel()
	// The caller's deadline is one attempt long, as when the agent's own tool call times out;
	// a second, so that a busy machine still sends the request before it ends.
	w := newWorld(t, time.Second, time.Second)
	// Stripe commits the refund but answers only after the caller has given up.
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 2 * time.Second})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != refund.Unconfirmed {
		t.Fatalf("first call answered %+v, want unconfirmed", first)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("the fake committed %d refunds during the timeout, want 1", n)
	}
	time.Sleep(1200 * time.Millisecond) // the first request finishes at the fake
	second, err := w.Refunds.Refund(ctx, w.Req("toolu_02"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != refund.Refunded || second.OperationID != first.OperationID || second.RefundID != w.Fake.Refunds()[0].ID {
		t.Fatalf("second call answered %+v, want refunded %s on operation %s", second, w.Fake.Refunds()[0].ID, first.OperationID)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("the fake's ledger holds %d refunds, want 1", n)
	}
	if n := w.Count(t, `SELECT count(DISTINCT provider_key) FROM attempts`); n != 1 {
		t.Fatalf("%d provider keys used, want 1", n)
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE request_ref IN ('toolu_01', 'toolu_02')`); n != 2 {
		t.Fatalf("%d client requests recorded, want 2", n)
	}
	if md := w.Fake.Refunds()[0].Metadata[stripe.MetadataKey]; md != first.OperationID {
		t.Fatalf("refund metadata names %q, want the operation %s", md, first.OperationID)
	}
}

// The same story, with Stripe holding its answer longer than the whole first call and the
// customer's "try again" arriving while it still holds it: every resend meets 409 (the key
// is in use). A 409 can never refund twice, so the second call waits for Stripe within its
// deadline instead of spending the operation's budget, and gets the refund; the first call
// answers unconfirmed, not checking, and the operation never becomes unknown.
func TestSeedStoryStripeHoldsLongerThanTheFirstCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, time.Second)
	// Stripe is still running the first request (and holding its key) when the call gives
	// up, and commits the refund only after it.
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultSlow, Delay: 3500 * time.Millisecond})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Unconfirmed {
		t.Fatalf("first call: %+v %v, want unconfirmed", first, err)
	}
	patient := *w.Refunds
	patient.Deadline = 8 * time.Second // the agent's own tool call timeout
	second, err := patient.Refund(ctx, w.Req("toolu_02"))
	if err != nil {
		t.Fatal(err)
	}
	refunds := w.Fake.Refunds()
	if len(refunds) != 1 || second.Status != refund.Refunded || second.OperationID != first.OperationID || second.RefundID != refunds[0].ID {
		t.Fatalf("second call answered %+v with %d refunds at Stripe, want refunded once on %s", second, len(refunds), first.OperationID)
	}
	waits := w.Count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND outcome = 'key_in_use'`, first.OperationID)
	if waits == 0 || w.Count(t, `SELECT key_waits FROM operations WHERE id = $1`, first.OperationID) != waits {
		t.Fatalf("%d key-in-use attempts recorded; the operation counts them apart", waits)
	}
	// The audit trail: its rows, and the finishes the attempts record (ops rule 6).
	if n := w.Count(t, `SELECT (SELECT count(*) FROM audit_log WHERE entity_id = $1 AND after->>'status' = 'unknown')
		+ (SELECT count(*) FROM attempts WHERE operation_id = $1::uuid AND op_status = 'unknown')`, first.OperationID); n != 0 {
		t.Fatal("the operation was marked unknown while Stripe held the key")
	}
}

// ops rule 3: twenty concurrent calls for one intent make one refund at Stripe.
func TestTwentyConcurrentCallsRefundOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2*time.Second, 5*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 100 * time.Millisecond})
	var wg sync.WaitGroup
	answers := make([]refund.Answer, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = w.Refunds.Refund(context.Background(), w.Req(fmt.Sprintf("click-%d", i)))
		}()
	}
	wg.Wait()
	ops := map[string]bool{}
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if a.Status == "failed" || a.Status == "checking" {
			t.Fatalf("call %d answered %+v", i, a)
		}
		ops[a.OperationID] = true
	}
	if len(ops) != 1 {
		t.Fatalf("%d operations, want 1", len(ops))
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds at the fake, want 1", n)
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE duplicate`); n != 19 {
		t.Fatalf("%d duplicate requests recorded, want 19", n)
	}
}

// ops rule 5: a saved provider 500 replays itself, so the operation is unknown at once and nothing more is sent.
func TestSavedServerErrorMeansCheckingAndNoMoreSends(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultServerError})
	ctx := context.Background()
	a, err := w.Refunds.Refund(ctx, w.Req("a"))
	if err != nil || a.Status != refund.Checking || a.Note != refund.CheckingNote {
		t.Fatalf("answer %+v (%v), want checking with the note", a, err)
	}
	b, err := w.Refunds.Refund(ctx, w.Req("b"))
	if err != nil || b.Status != refund.Checking || b.OperationID != a.OperationID {
		t.Fatalf("second answer %+v (%v), want checking on the same operation", b, err)
	}
	if n := w.Count(t, `SELECT count(*) FROM attempts`); n != 1 {
		t.Fatalf("%d attempts, want 1: nothing is sent after a saved 500", n)
	}
	if n := len(w.Fake.Refunds()); n != 0 {
		t.Fatalf("%d refunds at the fake", n)
	}
}

func TestKeyInUseWaitsAndReusesTheKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 250*time.Millisecond, 5*time.Second)
	w.Refunds.Ledger.Limits.BaseBackoff, w.Refunds.Ledger.Limits.MaxBackoff = 200*time.Millisecond, 200*time.Millisecond
	// The first send is slow at the fake (1.2 s): the client gives up at 250 ms and sends
	// again 200 ms later, while the first still runs, so Stripe answers 409. The margin is
	// wide so that a busy machine, late by most of a second, still sends the second in time.
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultSlow, Delay: 1200 * time.Millisecond})
	ctx := context.Background()
	a, err := w.Refunds.Refund(ctx, w.Req("a"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status == refund.Unconfirmed {
		time.Sleep(300 * time.Millisecond)
		if a, err = w.Refunds.Refund(ctx, w.Req("b")); err != nil {
			t.Fatal(err)
		}
	}
	var outcomes []string
	rows, _ := w.DB.Pool.Query(ctx, `SELECT outcome FROM attempts ORDER BY n`)
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		outcomes = append(outcomes, o)
	}
	if a.Status != refund.Refunded {
		t.Fatalf("answer %+v, attempts %v", a, outcomes)
	}
	if len(outcomes) < 3 || outcomes[0] != "timeout" || outcomes[1] != "key_in_use" || outcomes[len(outcomes)-1] != "ok" {
		t.Fatalf("attempts %v, want timeout, key_in_use, ..., ok", outcomes)
	}
	if n := w.Count(t, `SELECT count(DISTINCT provider_key) FROM attempts`); n != 1 {
		t.Fatalf("%d keys used", n)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds", n)
	}
}

func TestBudgetOfSixAcrossCallsEndsUnknown(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultUnavailable})
	ctx := context.Background()
	a, err := w.Refunds.Refund(ctx, w.Req("1"))
	if err != nil || a.Status != refund.Unconfirmed {
		t.Fatalf("first call %+v (%v), want unconfirmed", a, err)
	}
	b, err := w.Refunds.Refund(ctx, w.Req("2"))
	if err != nil || b.Status != refund.Checking {
		t.Fatalf("second call %+v (%v), want checking", b, err)
	}
	if n := w.Count(t, `SELECT count(*) FROM attempts`); n != 6 {
		t.Fatalf("%d attempts, want 6", n)
	}
	c, err := w.Refunds.Refund(ctx, w.Req("3"))
	if err != nil || c.Status != refund.Checking {
		t.Fatalf("third call %+v (%v)", c, err)
	}
	if n := w.Count(t, `SELECT count(*) FROM attempts`); n != 6 {
		t.Fatalf("%d attempts after the third call, want still 6", n)
	}
}

func TestPastRetentionExpiresWithoutSending(t *testing.T) {
	t.Parallel()
	// A second for the call: its payment check and its operation come first, and on a busy
	// machine a shorter call can run out before its request reaches Stripe at all.
	w := newWorld(t, time.Second, time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 1500 * time.Millisecond})
	ctx := context.Background()
	a, err := w.Refunds.Refund(ctx, w.Req("1"))
	if err != nil || a.Status != refund.Unconfirmed {
		t.Fatalf("first call %+v (%v)", a, err)
	}
	w.Clock.Advance(24 * time.Hour) // the fake forgets the key too: a resend would refund twice
	b, err := w.Refunds.Refund(ctx, w.Req("2"))
	if err != nil || b.Status != refund.Checking {
		t.Fatalf("after retention: %+v (%v), want checking", b, err)
	}
	op, _ := w.DB.Get(ctx, a.OperationID)
	if op.Status != ops.StatusExpired {
		t.Fatalf("status %s, want expired", op.Status)
	}
	if n := w.Count(t, `SELECT count(*) FROM attempts`); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	waitForFakeRefunds(t, w, 1)
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds at the fake, want 1", n)
	}
	// The lookup finds the refund and closes the expired operation with it as evidence.
	res, applied, err := w.Refunds.Lookup(ctx, w.DB, a.OperationID, "oncall@example.com")
	if err != nil || !res.Found() || applied.Outcome != "closed" || applied.Op.Status != ops.StatusSucceeded {
		t.Fatalf("lookup %+v %+v (%v)", res, applied, err)
	}
	if n := w.Count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup'`, a.OperationID); n != 1 {
		t.Fatalf("%d lookup evidence rows", n)
	}
}

func TestRemainderIsCheckedAgainstStripeAndOpenRefunds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	ctx := context.Background()
	half := w.Req("a")
	half.AmountCents = 1900
	if a, err := w.Refunds.Refund(ctx, half); err != nil || a.Status != refund.Refunded {
		t.Fatalf("first half: %+v (%v)", a, err)
	}
	// The same order and amount again, after the replay window, is a new intent, and fits.
	w.Clock.Advance(refund.ReplayWindow + time.Minute)
	again := w.Req("b")
	again.AmountCents = 1900
	if a, err := w.Refunds.Refund(ctx, again); err != nil || a.Status != refund.Refunded {
		t.Fatalf("second half: %+v (%v)", a, err)
	}
	before := w.Count(t, `SELECT count(*) FROM operations`)
	over := w.Req("c")
	over.AmountCents = 100
	_, err := w.Refunds.Refund(ctx, over)
	if ops.ErrorReason(err) != "amount_over_remainder" {
		t.Fatalf("over the remainder: %v", err)
	}
	if after := w.Count(t, `SELECT count(*) FROM operations`); after != before {
		t.Fatalf("a refused request opened an operation")
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND request_ref = 'c'`); n != 1 {
		t.Fatalf("the refused request was not recorded")
	}
	if n := len(w.Fake.Refunds()); n != 2 {
		t.Fatalf("%d refunds", n)
	}
}

func TestDefiniteRefusalFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddPaymentIntent("pi_other", 500, "usd", fake.OwnedBy("shop"))
	ctx := context.Background()
	// Someone refunds the whole payment in Stripe's dashboard after our remainder check,
	// while our request is on its way: Stripe refuses ours, and nothing is refunded twice.
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultSlow, Delay: 900 * time.Millisecond})
	outside := stripego.New("sk_test_outside", &stripelib.Backends{API: stripelib.GetBackendWithConfig(stripelib.APIBackend,
		&stripelib.BackendConfig{URL: stripelib.String(w.Base), MaxNetworkRetries: stripelib.Int64(0)})})
	done := make(chan error, 1)
	go func() {
		// Once our attempt is recorded, our request is on its way and held at Stripe; the
		// outside refund comes in meanwhile, however slow this machine is.
		for w.Count(t, `SELECT count(*) FROM attempts`) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(150 * time.Millisecond)
		_, err := outside.Refunds.New(&stripelib.RefundParams{PaymentIntent: stripelib.String("pi_other")})
		done <- err
	}()
	r := w.Req("x")
	r.PaymentIntent, r.AmountCents, r.OrderID = "pi_other", 500, "77"
	a, err := w.Refunds.Refund(ctx, r)
	if err := <-done; err != nil {
		t.Fatalf("outside refund: %v", err)
	}
	if err != nil || a.Status != refund.Failed || a.Reason == "" {
		t.Fatalf("answer %+v (%v), want failed with Stripe's reason", a, err)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds, want only the outside one", n)
	}
}

func TestBadRequestsAreRefusedBeforeAnyOperation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	ctx := context.Background()
	cases := map[string]func(*refund.Request){
		"zero amount":     func(r *refund.Request) { r.AmountCents = 0 },
		"negative amount": func(r *refund.Request) { r.AmountCents = -5 },
		"absurd amount":   func(r *refund.Request) { r.AmountCents = 1 << 40 },
		"currency":        func(r *refund.Request) { r.Currency = "xyz" },
		"no order":        func(r *refund.Request) { r.OrderID = "" },
		"bad payment":     func(r *refund.Request) { r.PaymentIntent = "ch_1" },
		"bad reason":      func(r *refund.Request) { r.Reason = "because" },
		"unknown payment": func(r *refund.Request) { r.PaymentIntent = "pi_nope" },
	}
	for name, mut := range cases {
		r := w.Req(name)
		mut(&r)
		if _, err := w.Refunds.Refund(ctx, r); ops.ErrorCode(err) != ops.EINVALID {
			t.Fatalf("%s: %v, want invalid", name, err)
		}
	}
	if n := w.Count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened by bad requests", n)
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != len(cases) {
		t.Fatalf("%d rejected requests recorded, want %d", n, len(cases))
	}
}

func TestTryAgainAfterTheRefundWentThroughAnswersThatRefund(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Refunded {
		t.Fatalf("first: %+v (%v)", first, err)
	}
	w.Clock.Advance(time.Hour)
	again, err := w.Refunds.Refund(ctx, w.Req("toolu_02"))
	if err != nil || again.Status != refund.Refunded || again.OperationID != first.OperationID || again.RefundID != first.RefundID {
		t.Fatalf("again: %+v (%v), want the first refund", again, err)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds", n)
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE answer = 'replayed' AND operation_id = $1`, first.OperationID); n != 1 {
		t.Fatalf("%d replayed answers recorded", n)
	}
}

func TestRefusalAtStripeFailsWithItsReason(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultRefuse})
	a, err := w.Refunds.Refund(context.Background(), w.Req("x"))
	if err != nil || a.Status != refund.Failed || a.Reason != "charge_disputed" {
		t.Fatalf("answer %+v (%v), want failed: charge_disputed", a, err)
	}
	op, _ := w.DB.Get(context.Background(), a.OperationID)
	if op.Status != ops.StatusFailed || op.ClosedAt == nil {
		t.Fatalf("operation %s", op.Status)
	}
}

// ops rule 4: backoff honours the provider's Retry-After.
func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 5*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultRateLimit, RetryAfter: 1})
	start := time.Now()
	a, err := w.Refunds.Refund(context.Background(), w.Req("a"))
	if err != nil || a.Status != refund.Refunded {
		t.Fatalf("%+v (%v)", a, err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("resent after %v, before Stripe's Retry-After of 1s", waited)
	}
	var outcomes string
	_ = w.DB.Pool.QueryRow(context.Background(), `SELECT string_agg(outcome, ',' ORDER BY n) FROM attempts`).Scan(&outcomes)
	if outcomes != "rate_limited,ok" {
		t.Fatalf("attempts %s", outcomes)
	}
}

func TestDroppedConnectionAfterCommitIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 5*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultDropAfterCommit})
	a, err := w.Refunds.Refund(context.Background(), w.Req("a"))
	if err != nil || a.Status != refund.Refunded {
		t.Fatalf("%+v (%v)", a, err)
	}
	var outcomes string
	_ = w.DB.Pool.QueryRow(context.Background(), `SELECT string_agg(outcome, ',' ORDER BY n) FROM attempts`).Scan(&outcomes)
	if outcomes != "timeout,ok" {
		t.Fatalf("attempts %s, want the lost answer as a timeout, then the replay", outcomes)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds", n)
	}
}

// TestOwnershipCheckCanBeTurnedOff: a single-tenant install (SETTLE_STRIPE_TENANT_CHECK=off)
// refunds payments that carry no tenant; with the check on the same call is refused.
func TestOwnershipCheckCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddPaymentIntent("pi_legacy", 3800, "usd")
	req := w.Req("legacy")
	req.PaymentIntent = "pi_legacy"
	if _, err := w.Refunds.Refund(context.Background(), req); ops.ErrorReason(err) != "unknown_payment" {
		t.Fatalf("with the check on: %v", err)
	}
	open := *w.Refunds
	open.AnyTenantsPayments = true
	req.RequestRef = "legacy-2"
	if ans, err := open.Refund(context.Background(), req); err != nil || ans.Status != refund.Refunded {
		t.Fatalf("with the check off: %+v %v", ans, err)
	}
}

// waitForFakeRefunds waits until the fake holds n refunds: a refund a call gave up on is
// committed by the fake after the fault's delay, later than that on a busy machine.
func waitForFakeRefunds(t *testing.T, w *world, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(w.Fake.Refunds()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fake holds %d refunds after 10 s, want %d", len(w.Fake.Refunds()), n)
		}
	}
}

// TestTryAgainWithAnotherReason: while the first refund's outcome is unknown (a saved 500),
// the same order and amount with another reason is answered with that refund's status and
// a note that the other parameters were not used: not a refusal that a client could read as
// "nothing was refunded" (ops rule 12).
func TestTryAgainWithAnotherReason(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultServerError})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Checking {
		t.Fatalf("first call: %+v %v", first, err)
	}
	again := w.Req("toolu_02")
	again.Reason = "duplicate"
	out, err := w.Refunds.Refund(ctx, again)
	if err != nil || out.Status != refund.Checking || out.OperationID != first.OperationID || !strings.Contains(out.Note, "other parameters were not used") {
		t.Fatalf("try again with another reason: %+v %v", out, err)
	}
	if n := len(w.Fake.Refunds()); n != 0 || w.Count(t, `SELECT count(*) FROM operations`) != 1 {
		t.Fatalf("%d refunds at Stripe, want none sent again", n)
	}
}

// TestRefundsOnlyTheTenantsOwnPayments: a tenant cannot refund another tenant's payment,
// nor one that carries no tenant, and cannot learn anything about either from the refusal:
// the error is, word for word, the one for a payment Stripe does not have (no amount,
// currency or refund count), which the API answers as 422 unknown_payment. Nothing is sent
// and the request is recorded as refused (ops rule 8).
func TestRefundsOnlyTheTenantsOwnPayments(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddPaymentIntent("pi_bank", 777_00, "eur", fake.OwnedBy("bank"))
	w.Fake.AddPaymentIntent("pi_nolabel", 555_00, "eur")
	var answers []string
	for _, pi := range []string{"pi_missing", "pi_bank", "pi_nolabel"} {
		r := w.Req("probe-" + pi)
		r.OrderID, r.AmountCents, r.Currency, r.PaymentIntent, r.Reason = "9", 100, "eur", pi, ""
		_, err := w.Refunds.Refund(context.Background(), r)
		detail := ops.ErrorMessage(err)
		answers = append(answers, fmt.Sprintf("%s %s %s", ops.ErrorCode(err), ops.ErrorReason(err), strings.ReplaceAll(detail, pi, "PI")))
		if strings.Contains(detail, "777") || strings.Contains(detail, "555") || strings.Contains(strings.ToLower(detail), "eur") {
			t.Fatalf("%s: the refusal tells the payment's amount or currency: %q", pi, detail)
		}
	}
	if answers[0] != answers[1] || answers[0] != answers[2] || !strings.HasPrefix(answers[0], ops.EINVALID+" unknown_payment ") {
		t.Fatalf("a foreign or unlabelled payment is answered unlike a missing one:\n%s", strings.Join(answers, "\n"))
	}
	if n := len(w.Fake.Refunds()); n != 0 || w.Count(t, `SELECT count(*) FROM operations`) != 0 {
		t.Fatalf("%d refunds sent for payments that are not the tenant's", n)
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected' AND request_ref LIKE 'probe-%'`); n != 3 {
		t.Fatalf("%d refused requests recorded, want 3", n)
	}
}
