package fake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops/fake"
)

const testKey = "sk_test_fake"

// testClock is a clock tests move by hand, so key retention can pass in microseconds.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// start runs a fake on loopback and closes it when the test ends.
func start(t *testing.T, opts fake.StripeOptions) (*fake.Stripe, string) {
	t.Helper()
	s := fake.NewStripe(opts)
	baseURL, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, baseURL
}

// newClient returns a real stripe-go client with its own retries off, so every call is one
// HTTP request, as Settle's adapter configures it. Keep-alives are off so a dropped
// connection is never silently re-sent by net/http (it replays requests carrying an
// Idempotency-Key on reused connections).
func newClient(t *testing.T, baseURL, key string, timeout time.Duration) *client.API {
	t.Helper()
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(baseURL),
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient: &http.Client{
			Timeout:   timeout,
			Transport: &http.Transport{DisableKeepAlives: true},
		},
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New(key, &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
}

func refundParams(pi string, amount int64, key string) *stripe.RefundParams {
	p := &stripe.RefundParams{PaymentIntent: stripe.String(pi)}
	if amount > 0 {
		p.Amount = stripe.Int64(amount)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("want *stripe.Error, got %T: %v", err, err)
	}
	return se
}

func TestCreateRetrieveListPaginate(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s, url := start(t, fake.StripeOptions{Clock: clock.Now})
	s.AddPaymentIntent("pi_order4417", 5000, "USD")
	s.AddPaymentIntent("pi_other", 700, "usd")
	sc := newClient(t, url, testKey, 5*time.Second)

	var ids []string
	for i := 0; i < 3; i++ {
		p := refundParams("pi_order4417", 1000, "")
		p.Reason = stripe.String("requested_by_customer")
		p.AddMetadata("settle_operation_id", "op_"+string(rune('a'+i)))
		r, err := sc.Refunds.New(p)
		if err != nil {
			t.Fatalf("create refund %d: %v", i, err)
		}
		if r.Status != stripe.RefundStatusSucceeded || r.Amount != 1000 || r.Currency != "usd" ||
			r.PaymentIntent.ID != "pi_order4417" || r.Charge == nil || !strings.HasPrefix(r.Charge.ID, "ch_") ||
			r.Metadata["settle_operation_id"] != "op_"+string(rune('a'+i)) || r.Reason != "requested_by_customer" {
			t.Fatalf("refund %d decoded wrong: %+v", i, r)
		}
		if r.LastResponse.RequestID == "" || !strings.HasPrefix(r.LastResponse.RequestID, "req_") {
			t.Errorf("missing Request-Id: %q", r.LastResponse.RequestID)
		}
		if r.LastResponse.IdempotencyKey == "" {
			t.Errorf("Idempotency-Key not echoed")
		}
		ids = append(ids, r.ID)
		clock.Advance(time.Minute)
	}
	if _, err := sc.Refunds.New(refundParams("pi_other", 0, "")); err != nil {
		t.Fatalf("refund on other intent: %v", err)
	}

	got, err := sc.Refunds.Get(ids[1], nil)
	if err != nil || got.ID != ids[1] || got.Amount != 1000 {
		t.Fatalf("retrieve: %+v, %v", got, err)
	}
	_, err = sc.Refunds.Get("re_missing", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("retrieve missing: %+v", se)
	}

	// One page at a time, newest first.
	lp := &stripe.RefundListParams{PaymentIntent: stripe.String("pi_order4417")}
	lp.Limit = stripe.Int64(2)
	lp.Single = true
	it := sc.Refunds.List(lp)
	var page []string
	for it.Next() {
		page = append(page, it.Refund().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page, []string{ids[2], ids[1]}) || !it.Meta().HasMore || it.Meta().URL != "/v1/refunds" {
		t.Fatalf("first page %v has_more=%v, want %v", page, it.Meta().HasMore, []string{ids[2], ids[1]})
	}
	lp.StartingAfter = stripe.String(ids[1])
	it = sc.Refunds.List(lp)
	page = nil
	for it.Next() {
		page = append(page, it.Refund().ID)
	}
	if !reflect.DeepEqual(page, []string{ids[0]}) || it.Meta().HasMore {
		t.Fatalf("second page %v has_more=%v", page, it.Meta().HasMore)
	}

	// The iterator follows has_more on its own.
	all := &stripe.RefundListParams{}
	all.Limit = stripe.Int64(1)
	n := 0
	for it := sc.Refunds.List(all); it.Next(); {
		n++
	}
	if n != 4 {
		t.Fatalf("auto-paged list saw %d refunds, want 4", n)
	}

	// created[gte] keeps the two newest of the order's refunds.
	cp := &stripe.RefundListParams{PaymentIntent: stripe.String("pi_order4417"),
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: clock.Now().Add(-2 * time.Minute).Unix()}}
	page = nil
	for it := sc.Refunds.List(cp); it.Next(); {
		page = append(page, it.Refund().ID)
	}
	if !reflect.DeepEqual(page, []string{ids[2], ids[1]}) {
		t.Fatalf("created filter: %v", page)
	}

	pp := &stripe.PaymentIntentParams{}
	pp.AddExpand("latest_charge")
	pi, err := sc.PaymentIntents.Get("pi_order4417", pp)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.Amount != 5000 || pi.AmountReceived != 5000 ||
		pi.LatestCharge == nil || pi.LatestCharge.AmountRefunded != 3000 || pi.LatestCharge.Refunded {
		t.Fatalf("payment intent: %+v charge %+v", pi, pi.LatestCharge)
	}
	ch, err := sc.Charges.Get(pi.LatestCharge.ID, nil)
	if err != nil || ch.Amount != 5000 || ch.AmountRefunded != 3000 || ch.PaymentIntent.ID != "pi_order4417" {
		t.Fatalf("charge: %+v, %v", ch, err)
	}
	plain, err := sc.PaymentIntents.Get("pi_order4417", nil)
	if err != nil || plain.LatestCharge == nil || plain.LatestCharge.ID != ch.ID {
		t.Fatalf("unexpanded latest_charge: %+v, %v", plain, err)
	}
}

func TestAmountRules(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 1000, "usd")
	sc := newClient(t, url, testKey, 5*time.Second)

	if _, err := sc.Refunds.New(refundParams("pi_1", 600, "")); err != nil {
		t.Fatal(err)
	}
	_, err := sc.Refunds.New(refundParams("pi_1", 600, ""))
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeInvalidRequest ||
		se.Code != stripe.ErrorCodeAmountTooLarge || se.Param != "amount" {
		t.Fatalf("over remainder: %+v", se)
	}
	p := refundParams("pi_1", 0, "")
	p.Amount = stripe.Int64(0)
	_, err = sc.Refunds.New(p)
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Param != "amount" {
		t.Fatalf("zero amount: %+v", se)
	}
	// No amount refunds the remainder.
	r, err := sc.Refunds.New(refundParams("pi_1", 0, ""))
	if err != nil || r.Amount != 400 {
		t.Fatalf("remainder refund: %+v, %v", r, err)
	}
	_, err = sc.Refunds.New(refundParams("pi_1", 0, ""))
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodeChargeAlreadyRefunded {
		t.Fatalf("fully refunded: %+v", se)
	}
	_, err = sc.Refunds.New(refundParams("pi_nope", 100, ""))
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("unknown intent: %+v", se)
	}
	_, err = sc.Refunds.New(&stripe.RefundParams{Charge: stripe.String("ch_nope")})
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Param != "charge" {
		t.Fatalf("unknown charge: %+v", se)
	}
	if got := len(s.Refunds()); got != 2 {
		t.Fatalf("ledger has %d refunds, want 2", got)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	sc := newClient(t, url, testKey, 5*time.Second)

	first, err := sc.Refunds.New(refundParams("pi_1", 3800, "c41f7a2e"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sc.Refunds.New(refundParams("pi_1", 3800, "c41f7a2e"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID {
		t.Fatalf("replay created %s, want %s", again.ID, first.ID)
	}
	h := again.LastResponse.Header
	if h.Get("Idempotent-Replayed") != "true" || h.Get("Original-Request") != first.LastResponse.RequestID ||
		again.LastResponse.IdempotencyKey != "c41f7a2e" || again.LastResponse.RequestID == first.LastResponse.RequestID {
		t.Fatalf("replay headers: %v", h)
	}
	if first.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first response marked as replayed")
	}
	ledger := s.Refunds()
	if len(ledger) != 1 || ledger[0].IdempotencyKey != "c41f7a2e" {
		t.Fatalf("ledger: %+v", ledger)
	}

	// Other parameters under the same key are refused, not run.
	_, err = sc.Refunds.New(refundParams("pi_1", 1000, "c41f7a2e"))
	se := stripeErr(t, err)
	var idem *stripe.IdempotencyError
	if se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeIdempotency || !errors.As(err, &idem) ||
		!strings.Contains(se.Msg, "same parameters") {
		t.Fatalf("mismatch: %+v", se)
	}

	// Keys are scoped per account: another API key runs its own request.
	other := newClient(t, url, "sk_test_other_account", 5*time.Second)
	s.AddPaymentIntent("pi_2", 500, "usd")
	if _, err := other.Refunds.New(refundParams("pi_2", 500, "c41f7a2e")); err != nil {
		t.Fatalf("same key on another account: %v", err)
	}
	if got := len(s.Refunds()); got != 2 {
		t.Fatalf("ledger has %d refunds, want 2", got)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	// The first request is held 2 s, the second sent 0.5 s after it: wide margins both ways,
	// so that a busy machine still sends them in this order and overlapping.
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 2 * time.Second, Calls: []int{1}})
	sc := newClient(t, url, testKey, 5*time.Second)

	type result struct {
		r   *stripe.Refund
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-1"))
		done <- result{r, err}
	}()
	time.Sleep(500 * time.Millisecond) // let the first request take the key
	_, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-1"))
	if se := stripeErr(t, err); se.HTTPStatusCode != 409 || se.Type != stripe.ErrorTypeIdempotency ||
		se.Code != stripe.ErrorCodeIdempotencyKeyInUse {
		t.Fatalf("overlapping request: %+v", se)
	}
	first := <-done
	if first.err != nil {
		t.Fatalf("first request: %v", first.err)
	}
	// The 409 was not stored: once the first finished, the key replays its refund.
	again, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-1"))
	if err != nil || again.ID != first.r.ID {
		t.Fatalf("after the first finished: %+v, %v", again, err)
	}
	if got := len(s.Refunds()); got != 1 {
		t.Fatalf("ledger has %d refunds, want 1", got)
	}
}

func TestSavedServerErrorReplays(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Calls: []int{1}})
	sc := newClient(t, url, testKey, 5*time.Second)

	for i := 0; i < 2; i++ {
		_, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-500"))
		se := stripeErr(t, err)
		if se.HTTPStatusCode != 500 || se.Type != stripe.ErrorTypeAPI {
			t.Fatalf("attempt %d: %+v", i+1, se)
		}
		if replayed := se.LastResponse.Header.Get("Idempotent-Replayed"); (i == 1) != (replayed == "true") {
			t.Fatalf("attempt %d: Idempotent-Replayed=%q", i+1, replayed)
		}
	}
	if got := len(s.Refunds()); got != 0 {
		t.Fatalf("a 500 committed %d refunds", got)
	}
	// Only a new key runs again; that is the caller's decision to make, not a retry's.
	if _, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-new")); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitAndUnavailableAreNotStored(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultRateLimit, RetryAfter: 7, Calls: []int{1}})
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultUnavailable, Calls: []int{2}})
	sc := newClient(t, url, testKey, 5*time.Second)

	_, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-429"))
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 429 || se.Code != stripe.ErrorCodeRateLimit || se.LastResponse.Header.Get("Retry-After") != "7" {
		t.Fatalf("429: %+v header %v", se, se.LastResponse.Header)
	}
	_, err = sc.Refunds.New(refundParams("pi_1", 3800, "key-429"))
	se = stripeErr(t, err)
	if se.HTTPStatusCode != 503 || se.LastResponse.Header.Get("Stripe-Should-Retry") != "true" {
		t.Fatalf("503: %+v", se)
	}
	r, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-429"))
	if err != nil {
		t.Fatalf("third attempt: %v", err)
	}
	if r.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("third attempt was a replay; a 429 or 503 was stored")
	}
	if got := len(s.Refunds()); got != 1 {
		t.Fatalf("ledger has %d refunds, want 1", got)
	}
}

func TestTimeoutAfterCommit(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Delay: 5 * time.Second, Times: 1})

	impatient := newClient(t, url, testKey, 300*time.Millisecond)
	_, err := impatient.Refunds.New(refundParams("pi_1", 3800, "key-timeout"))
	if err == nil {
		t.Fatal("want a client timeout")
	}
	var se *stripe.Error
	if errors.As(err, &se) {
		t.Fatalf("want a transport timeout, got a Stripe answer: %v", se)
	}
	ledger := s.Refunds()
	if len(ledger) != 1 {
		t.Fatalf("the refund was not committed: %+v", ledger)
	}
	r, err := newClient(t, url, testKey, 5*time.Second).Refunds.New(refundParams("pi_1", 3800, "key-timeout"))
	if err != nil || r.ID != ledger[0].ID || r.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after timeout: %+v, %v", r, err)
	}
	if got := len(s.Refunds()); got != 1 {
		t.Fatalf("ledger has %d refunds, want 1", got)
	}
}

func TestDropAfterCommit(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	s.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultDropAfterCommit, Calls: []int{1}})
	sc := newClient(t, url, testKey, 5*time.Second)

	_, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-drop"))
	var se *stripe.Error
	if err == nil || errors.As(err, &se) {
		t.Fatalf("want a connection error, got %v", err)
	}
	ledger := s.Refunds()
	if len(ledger) != 1 {
		t.Fatalf("ledger: %+v", ledger)
	}
	r, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-drop"))
	if err != nil || r.ID != ledger[0].ID {
		t.Fatalf("replay after drop: %+v, %v", r, err)
	}
}

// TestRetentionExpiryRefundsTwice shows the danger Settle guards against: after the key is
// forgotten, a retry with the same key is a new refund.
func TestRetentionExpiryRefundsTwice(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s, url := start(t, fake.StripeOptions{Clock: clock.Now, Retention: 24 * time.Hour})
	s.AddPaymentIntent("pi_1", 10000, "usd")
	sc := newClient(t, url, testKey, 5*time.Second)

	first, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-old"))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(23 * time.Hour)
	kept, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-old"))
	if err != nil || kept.ID != first.ID {
		t.Fatalf("within retention: %+v, %v", kept, err)
	}
	clock.Advance(time.Hour)
	second, err := sc.Refunds.New(refundParams("pi_1", 3800, "key-old"))
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID || second.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after retention the key still replayed %s", second.ID)
	}
	ledger := s.Refunds()
	if len(ledger) != 2 || ledger[1].Created.Sub(ledger[0].Created) != 24*time.Hour {
		t.Fatalf("ledger: %+v", ledger)
	}
}

type receivedEvent struct {
	event  stripe.Event
	header string
}

// webhookReceiver verifies every delivery as Settle's handler would, and fails the first
// failFirst deliveries to exercise retries.
func webhookReceiver(t *testing.T, secret string, failFirst int) (string, <-chan receivedEvent) {
	t.Helper()
	ch := make(chan receivedEvent, 32)
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		fail := calls <= failFirst
		mu.Unlock()
		if fail {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		sig := r.Header.Get("Stripe-Signature")
		ev, err := webhook.ConstructEventWithOptions(body, sig, secret,
			webhook.ConstructEventOptions{Tolerance: 300 * time.Second})
		if err != nil {
			t.Errorf("webhook does not verify: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ch <- receivedEvent{ev, sig}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func waitEvent(t *testing.T, ch <-chan receivedEvent) stripe.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev.event
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook arrived")
		return stripe.Event{}
	}
}

func TestWebhooks(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test_secret"
	hookURL, got := webhookReceiver(t, secret, 1)
	s, url := start(t, fake.StripeOptions{WebhookURL: hookURL, WebhookSecret: secret})
	s.AddPaymentIntent("pi_1", 3800, "usd")
	sc := newClient(t, url, testKey, 5*time.Second)

	p := refundParams("pi_1", 3800, "key-hook")
	p.AddMetadata("settle_operation_id", "op_5521")
	r, err := sc.Refunds.New(p)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]stripe.Event{}
	for i := 0; i < 2; i++ {
		ev := waitEvent(t, got)
		byType[string(ev.Type)] = ev
	}
	created, ok := byType["refund.created"]
	if !ok || created.Data.Object["id"] != r.ID || created.APIVersion != stripe.APIVersion ||
		created.Request == nil || created.Request.IdempotencyKey != "key-hook" {
		t.Fatalf("refund.created: %+v", created)
	}
	var obj stripe.Refund
	if err := json.Unmarshal(created.Data.Raw, &obj); err != nil ||
		obj.Metadata["settle_operation_id"] != "op_5521" || obj.Amount != 3800 {
		t.Fatalf("refund in event: %+v, %v", obj, err)
	}
	refunded, ok := byType["charge.refunded"]
	if !ok || refunded.Data.Object["refunded"] != true || refunded.Data.Object["amount_refunded"] != float64(3800) {
		t.Fatalf("charge.refunded: %+v", refunded.Data.Object)
	}

	// Resending delivers the same event id again; receivers must dedupe on it.
	if err := s.ResendEvent(created.ID); err != nil {
		t.Fatal(err)
	}
	if again := waitEvent(t, got); again.ID != created.ID {
		t.Fatalf("resent %s, want %s", again.ID, created.ID)
	}
	if err := s.ResendEvent("evt_missing"); !errors.Is(err, fake.ErrNotFound) {
		t.Fatalf("resend unknown: %v", err)
	}

	if err := s.SetRefundStatus(r.ID, "failed", "lost_or_stolen_card"); err != nil {
		t.Fatal(err)
	}
	updated := waitEvent(t, got)
	if updated.Type != "refund.updated" || updated.Data.Object["status"] != "failed" ||
		updated.Data.PreviousAttributes["status"] != "succeeded" {
		t.Fatalf("refund.updated: %+v", updated.Data)
	}
	// A failed refund gives the money back to the refundable remainder.
	ch, err := sc.Charges.Get(obj.Charge.ID, nil)
	if err != nil || ch.AmountRefunded != 0 {
		t.Fatalf("charge after failed refund: %+v, %v", ch, err)
	}

	// The receiver hands us an event before its 200 reaches the fake, so wait for the
	// fake to record the delivery.
	var events []fake.Event
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		events = s.Events()
		delivered := 0
		for _, ev := range events {
			if ev.Delivered {
				delivered++
			}
		}
		if delivered == len(events) || time.Now().After(deadline) {
			break
		}
	}
	if len(events) != 3 || events[0].Attempts < 2 && events[1].Attempts < 2 {
		t.Fatalf("events: %+v", events)
	}
	for _, ev := range events {
		if !ev.Delivered {
			t.Fatalf("event %s not delivered: %s", ev.ID, ev.LastError)
		}
	}
	// Events are also readable through the API, as a reconciler would page them.
	list := sc.Events.List(&stripe.EventListParams{Type: stripe.String("refund.*")})
	n := 0
	for list.Next() {
		n++
	}
	if list.Err() != nil || n != 2 {
		t.Fatalf("events list: %d, %v", n, list.Err())
	}
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	post := func(path, contentType, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(url+path, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post("/_fake/payment_intents", "application/json", `{"id":"pi_admin","amount":2500,"currency":"eur"}`); resp.StatusCode != 201 {
		t.Fatalf("seed: %s", resp.Status)
	}
	if resp := post("/_fake/payment_intents", "application/json", `{"id":"pi_admin","amount":2500,"currency":"eur"}`); resp.StatusCode != 200 {
		t.Fatalf("reseed: %s", resp.Status)
	}
	if resp := post("/_fake/payment_intents", "application/json", `{"id":"pi_admin","amount":1,"currency":"eur"}`); resp.StatusCode != 409 {
		t.Fatalf("conflicting seed: %s", resp.Status)
	}
	if resp := post("/_fake/faults", "text/plain", "POST /v1/refunds server_error calls=1"); resp.StatusCode != 200 {
		t.Fatalf("faults: %s", resp.Status)
	}
	resp := post("/_fake/faults", "application/json", `[{"method":"GET","path":"/v1/charges/*","kind":"slow","delay":"10ms"}]`)
	var faults []fake.Fault
	if err := json.NewDecoder(resp.Body).Decode(&faults); err != nil || len(faults) != 2 || faults[1].Delay != 10*time.Millisecond {
		t.Fatalf("faults: %+v, %v", faults, err)
	}
	if resp := post("/_fake/faults", "text/plain", "POST explode"); resp.StatusCode != 400 {
		t.Fatalf("bad spec: %s", resp.Status)
	}

	sc := newClient(t, url, testKey, 5*time.Second)
	if _, err := sc.Refunds.New(refundParams("pi_admin", 100, "")); stripeErr(t, err).HTTPStatusCode != 500 {
		t.Fatalf("fault from admin route did not fire: %v", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, url+"/_fake/faults", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("clear faults: %v %v", resp, err)
	}
	r, err := sc.Refunds.New(refundParams("pi_admin", 100, ""))
	if err != nil {
		t.Fatal(err)
	}

	resp = post("/_fake/refunds/"+r.ID+"/status", "application/json", `{"status":"failed"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status: %s", resp.Status)
	}
	ledgerResp, err := http.Get(url + "/_fake/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer ledgerResp.Body.Close()
	var ledger []fake.Refund
	if err := json.NewDecoder(ledgerResp.Body).Decode(&ledger); err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 || ledger[0].ID != r.ID || ledger[0].Status != "failed" || ledger[0].Currency != "eur" ||
		!ledger[0].Created.Equal(s.Refunds()[0].Created) {
		t.Fatalf("ledger: %+v", ledger)
	}

	// Unknown routes answer like Stripe, and the API wants a key.
	res, err := http.Get(url + "/v1/refunds")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("Request-Id") == "" {
		t.Fatalf("no key: %s", res.Status)
	}
	_, err = sc.Customers.Get("cus_1", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 {
		t.Fatalf("unknown route: %+v", se)
	}
}

func TestFaultCallsTimesAndSeed(t *testing.T) {
	t.Parallel()
	s, url := start(t, fake.StripeOptions{})
	s.AddPaymentIntent("pi_1", 100, "usd")
	faults, err := fake.ParseFaults("GET /v1/payment_intents/* unavailable calls=2,4-5 times=2")
	if err != nil {
		t.Fatal(err)
	}
	s.AddFault(faults[0])
	sc := newClient(t, url, testKey, 5*time.Second)
	var pattern []bool
	for i := 0; i < 6; i++ {
		_, err := sc.PaymentIntents.Get("pi_1", nil)
		pattern = append(pattern, err != nil)
	}
	if want := []bool{false, true, false, true, false, false}; !reflect.DeepEqual(pattern, want) {
		t.Fatalf("fault pattern %v, want %v (times=2 stops call 5)", pattern, want)
	}

	// The same seed gives the same coin flips.
	flips := func() []bool {
		s, url := start(t, fake.StripeOptions{Seed: 42})
		s.AddPaymentIntent("pi_1", 100, "usd")
		s.AddFault(fake.Fault{Kind: fake.FaultUnavailable, Probability: 0.5})
		sc := newClient(t, url, testKey, 5*time.Second)
		var out []bool
		for i := 0; i < 12; i++ {
			_, err := sc.PaymentIntents.Get("pi_1", nil)
			out = append(out, err != nil)
		}
		return out
	}
	a, b := flips(), flips()
	hits := 0
	for _, v := range a {
		if v {
			hits++
		}
	}
	if !reflect.DeepEqual(a, b) || hits == 0 || hits == len(a) {
		t.Fatalf("seeded flips %v and %v", a, b)
	}
}

func TestParseFaults(t *testing.T) {
	t.Parallel()
	got, err := fake.ParseFaults("POST /v1/refunds timeout_after_commit p=0.1 delay=3s; POST /v1/refunds server_error calls=3\n" +
		"rate_limit retry_after=2 times=1;;* /v1/* slow delay=250ms")
	if err != nil {
		t.Fatal(err)
	}
	want := []fake.Fault{
		{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Probability: 0.1, Delay: 3 * time.Second},
		{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Calls: []int{3}},
		{Kind: fake.FaultRateLimit, RetryAfter: 2, Times: 1},
		{Method: "*", Path: "/v1/*", Kind: fake.FaultSlow, Delay: 250 * time.Millisecond},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"POST /v1/refunds",                 // no kind
		"POST /v1/refunds explode",         // unknown kind
		"POST /v1/refunds slow delay=fast", // bad duration
		"slow p=2",                         // probability out of range
		"slow calls=0",                     // calls are 1-based
		"slow colour=red",                  // unknown option
		"refunds slow",                     // path without /
		"slow chunk=3",                     // chunk is the fake LLM's option
		"slow lag=1s",                      // and so is lag
		"POST PUT /v1/refunds slow",        // two methods
	} {
		if _, err := fake.ParseFaults(bad); err == nil {
			t.Errorf("ParseFaults(%q) succeeded", bad)
		}
	}
	// Faults round-trip through the admin JSON form.
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back []fake.Fault
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
}

func TestStartIsLoopbackOnlyAndCloseIsPrompt(t *testing.T) {
	t.Parallel()
	open := fake.NewStripe(fake.StripeOptions{})
	if _, err := open.Start("0.0.0.0:0"); err == nil {
		t.Fatal("listening on every interface was allowed")
	}
	_ = open.Close()
	s := fake.NewStripe(fake.StripeOptions{})
	url, err := s.Start(":0")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("Start(:0) = %q, %v", url, err)
	}
	s.AddPaymentIntent("pi_1", 100, "usd")
	s.AddFault(fake.Fault{Kind: fake.FaultTimeoutAfterCommit, Delay: time.Hour})
	go func() { _, _ = newClient(t, url, testKey, time.Hour).Refunds.New(refundParams("pi_1", 100, "k")) }()
	for len(s.Refunds()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	begin := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("Close took %v with a request sleeping for an hour", d)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
