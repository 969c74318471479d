package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

const hookSecret = "whsec_test_settle"

// refundEnv is the refund API wired for real: Postgres, stripe-go, the fake Stripe.
type refundEnv struct {
	db     *pg.DB
	url    string
	token  string
	fake   *fake.Stripe
	ledger *ops.Ledger
}

func newRefundEnv(t *testing.T) *refundEnv {
	t.Helper()
	return newRefundEnvWith(t, fake.StripeOptions{})
}

// newRefundEnvWith is newRefundEnv with a fake Stripe of other options (pending refunds).
func newRefundEnvWith(t *testing.T, opts fake.StripeOptions) *refundEnv {
	t.Helper()
	s, tw := newServer(t)
	db := tw.DB
	opts.WebhookSecret = hookSecret
	fk, base := tw.Stripe(opts)
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	adapter := tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_web", AttemptTimeout: time.Second, WebhookSecret: hookSecret})
	ledger := ops.NewLedger(db, ops.SystemClock{})
	s.Clock = ops.SystemClock{}
	s.Refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: adapter, Deadline: 3 * time.Second}
	s.Operations = db
	s.StripeWebhooks = &stripe.Webhooks{Adapter: adapter, Ledger: ledger, Events: db}
	return &refundEnv{db: db, url: tw.Serve(s.Handler()), token: tw.Token(tw.Tenant("shop"), "test"), fake: fk, ledger: ledger}
}

func (e *refundEnv) post(t *testing.T, path, contentType, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, resp.Header
}

func (e *refundEnv) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const storyBody = `{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417","reason":"requested_by_customer","request_ref":"toolu_01"}`

func TestRefundAPIRefundsAndShowsTheOperation(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refunded" || !strings.HasPrefix(out["refund_id"].(string), "re_") {
		t.Fatalf("%d %v", code, out)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/operations/"+out["operation_id"].(string), nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var op map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&op)
	atts, _ := op["attempts"].([]any)
	if resp.StatusCode != 200 || op["status"] != "succeeded" || len(atts) != 1 || op["provider_ref"] != out["refund_id"] {
		t.Fatalf("GET operation: %d %v", resp.StatusCode, op)
	}
	if _, leaked := op["provider_key"]; leaked {
		t.Fatal("the provider key is shown to clients")
	}
	// Another tenant's token does not see it.
	other, _ := e.db.EnsureTenant(context.Background(), "other")
	tok, _ := e.db.CreateToken(context.Background(), other.ID, "t")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 404 {
		t.Fatalf("another tenant got %d", resp2.StatusCode)
	}
}

func TestRefundAPIBadInput(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	huge := `{"order_id":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, ctype, body string
		status            int
		code              string
	}{
		{"malformed", "application/json", `{"order_id":`, 400, "malformed_json"},
		{"wrong content type", "text/plain", storyBody, 415, "unsupported_media_type"},
		{"too large", "application/json", huge, 413, "body_too_large"},
		{"fractional cents", "application/json", `{"order_id":"1","amount_cents":10.5,"currency":"usd","payment_intent":"pi_4417"}`, 422, "invalid_field"},
		{"zero", "application/json", `{"order_id":"1","amount_cents":0,"currency":"usd","payment_intent":"pi_4417"}`, 422, "invalid_amount"},
		{"absurd", "application/json", `{"order_id":"1","amount_cents":999999999999,"currency":"usd","payment_intent":"pi_4417"}`, 422, "invalid_amount"},
		{"currency", "application/json", `{"order_id":"1","amount_cents":100,"currency":"zzz","payment_intent":"pi_4417"}`, 422, "invalid_currency"},
		{"missing amount", "application/json", `{"order_id":"1","currency":"usd","payment_intent":"pi_4417"}`, 422, "missing_field"},
		{"missing order", "application/json", `{"amount_cents":100,"currency":"usd","payment_intent":"pi_4417"}`, 422, "missing_field"},
		{"over remainder", "application/json", `{"order_id":"1","amount_cents":3900,"currency":"usd","payment_intent":"pi_4417"}`, 422, "amount_over_remainder"},
		{"not the tenant's payment", "application/json", `{"order_id":"1","amount_cents":100,"currency":"usd","payment_intent":"pi_missing"}`, 422, "unknown_payment"},
		{"unknown field", "application/json", `{"order_id":"1","amount":100}`, 400, "malformed_json"},
	}
	for _, c := range cases {
		code, out, h := e.post(t, "/api/v1/refunds", c.ctype, c.body)
		if code != c.status || out["code"] != c.code || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %v (%s), want %d %s as problem+json", c.name, code, out, h.Get("Content-Type"), c.status, c.code)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened by bad requests", n)
	}
	if n := e.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != len(cases) {
		t.Fatalf("%d rejected client requests recorded, want %d", n, len(cases))
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/refunds", strings.NewReader(storyBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer stl_nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("bad token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// signed returns a Stripe-signed refund.created event for refund re carrying opID.
func signed(t *testing.T, eventID, opID, re string, ts time.Time) ([]byte, string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"id": eventID, "object": "event", "type": "refund.created",
		"api_version": "2020-08-27", "created": ts.Unix(),
		"data": map[string]any{"object": map[string]any{"id": re, "object": "refund", "amount": 3800, "currency": "usd",
			"status": "succeeded", "payment_intent": "pi_4417", "metadata": map[string]string{stripe.MetadataKey: opID}}}})
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: hookSecret, Timestamp: ts})
	return payload, sp.Header
}

func (e *refundEnv) hook(t *testing.T, payload []byte, sig string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhooks/stripe", bytes.NewReader(payload))
	req.Header.Set("Stripe-Signature", sig)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestWebhookClosesUnknownOnceAndRefusesBadSignatures(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Times: 1})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "checking" {
		t.Fatalf("%d %v, want checking", code, out)
	}
	opID := out["operation_id"].(string)

	payload, sig := signed(t, "evt_1", opID, "re_from_hook", time.Now())
	// A tampered body or a stale signature changes nothing.
	if code, _ := e.hook(t, bytes.Replace(payload, []byte("3800"), []byte("1"), 1), sig); code != 401 {
		t.Fatalf("tampered event: %d, want 401", code)
	}
	old, oldSig := signed(t, "evt_old", opID, "re_from_hook", time.Now().Add(-10*time.Minute))
	if code, _ := e.hook(t, old, oldSig); code != 401 {
		t.Fatalf("event signed 10 minutes ago: %d, want 401", code)
	}
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusUnknown {
		t.Fatalf("a refused webhook changed the operation to %s", op.Status)
	}

	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "closed" {
		t.Fatalf("webhook: %d %v", code, out)
	}
	op, _ := e.db.Get(context.Background(), opID)
	if op.Status != ops.StatusSucceeded || op.ProviderRef != "re_from_hook" || op.ClosedBy != "stripe webhook" {
		t.Fatalf("after the webhook: %s %s by %q", op.Status, op.ProviderRef, op.ClosedBy)
	}
	version := op.Version
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "replayed" {
		t.Fatalf("replay: %d %v", code, out)
	}
	op, _ = e.db.Get(context.Background(), opID)
	if op.Version != version {
		t.Fatal("a replayed event changed the operation")
	}
	if n := e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'webhook'`, opID); n != 1 {
		t.Fatalf("%d webhook evidence rows", n)
	}
	if n := e.count(t, `SELECT count(*) FROM provider_events WHERE event_id = 'evt_1'`); n != 1 {
		t.Fatalf("%d event rows", n)
	}
}

// TestRefundPendingIsNotRefunded: Stripe answers a refund pending (the bank has yet to
// settle it). The API says refund_pending, not refunded, and support's sentence says it is
// on its way. When Stripe later reports it failed, the operation becomes failed after
// success, a reconciliation exception is raised, and support's sentence says it did not go
// through.
func TestRefundPendingIsNotRefunded(t *testing.T) {
	t.Parallel()
	e := newRefundEnvWith(t, fake.StripeOptions{PendingRefunds: true})
	e.fake.SetWebhookURL(e.url + "/webhooks/stripe")
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refund_pending" || out["refund_id"] == "" {
		t.Fatalf("pending refund answered %d %v, want refund_pending", code, out)
	}
	opID := out["operation_id"].(string)
	op, _ := e.db.Get(context.Background(), opID)
	if c := refund.CustomerStatus(op, nil); !strings.Contains(c.Sentence, "on its way") || strings.Contains(c.Sentence, "has been issued") {
		t.Fatalf("support is told %q while the refund is pending", c.Sentence)
	}
	if err := e.fake.SetRefundStatus(out["refund_id"].(string), "failed", "declined"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for op.Status != ops.StatusFailed && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		op, _ = e.db.Get(context.Background(), opID)
	}
	if op.Status != ops.StatusFailed {
		t.Fatalf("after Stripe failed the refund the operation is %s", op.Status)
	}
	if n := e.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1 AND status = 'open'`, opID); n != 1 {
		t.Fatalf("%d open failed-after-success exceptions, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'fail_after_success'`, opID); n != 1 {
		t.Fatalf("the change is audited %d times, want once", n)
	}
	if c := refund.CustomerStatus(op, nil); !strings.Contains(c.Sentence, "did not go through") {
		t.Fatalf("support is told %q after the refund failed", c.Sentence)
	}
	// The alert's signal counts the open exception.
	rows, err := alertstore.New(e.db).Backlog(context.Background(), time.Now())
	var open float64
	for _, r := range rows {
		open += r.Values[alerts.FailedAfterSuccess]
	}
	if err != nil || open != 1 {
		t.Fatalf("failed_after_success signal %v (%v), want 1", open, err)
	}
	// The customer's try again may refund now: nothing moved.
	code, again, _ := e.post(t, "/api/v1/refunds", "application/json", strings.Replace(storyBody, "toolu_01", "toolu_03", 1))
	if code != 200 || again["operation_id"] == opID {
		t.Fatalf("try again after the failure: %d %v", code, again)
	}
}
