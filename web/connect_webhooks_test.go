package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// connectSecret signs the Connect endpoint's events: connected accounts' events.
const connectSecret = "whsec_test_connect"

// newConnectEnv is the refund API with the tenant "shop" bound to acct_A, where pi_4417 was
// paid, and both webhook endpoints' secrets; the fake signs as the Connect endpoint.
func newConnectEnv(t *testing.T, opts fake.StripeOptions) *refundEnv {
	t.Helper()
	s, tw := newServer(t)
	db := tw.DB
	opts.WebhookSecret = connectSecret
	fk, base := tw.Stripe(opts)
	if err := fk.AddConnectedPaymentIntent("acct_A", "pi_4417", 3800, "usd"); err != nil {
		t.Fatal(err)
	}
	adapter := tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_web", AttemptTimeout: time.Second,
		WebhookSecret: hookSecret, ConnectWebhookSecret: connectSecret, Accounts: db})
	ledger := ops.NewLedger(db, ops.SystemClock{})
	s.Clock = ops.SystemClock{}
	s.Refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: adapter, Deadline: 3 * time.Second}
	s.Operations = db
	s.StripeWebhooks = &stripe.Webhooks{Adapter: adapter, Ledger: ledger, Events: db}
	token := tw.Token(tw.Tenant("shop"), "test")
	if _, err := db.SetStripeAccount(context.Background(), "shop", "acct_A", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	return &refundEnv{db: db, url: tw.Serve(s.Handler()), token: token, fake: fk, ledger: ledger}
}

// signedFrom returns a refund.created event of account ("" for the platform) for refund re
// carrying opID, signed with secret.
func signedFrom(t *testing.T, secret, account, eventID, opID, re string) ([]byte, string) {
	t.Helper()
	ev := map[string]any{"id": eventID, "object": "event", "type": "refund.created", "api_version": "2020-08-27",
		"created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{"id": re, "object": "refund", "amount": 3800, "currency": "usd",
			"status": "succeeded", "payment_intent": "pi_4417", "metadata": map[string]string{stripe.MetadataKey: opID}}}}
	if account != "" {
		ev["account"] = account
	}
	payload, _ := json.Marshal(ev)
	return payload, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: time.Now()}).Header
}

// TestConnectWebhooksChangeOnlyTheirTenantsOperations: the operation of the tenant bound to
// acct_A waits in Unknown. An event from acct_B naming it and a platform event naming it
// are answered 200 (Stripe stops resending them), recorded, and change nothing: no close,
// no charge tied to the operation. The event from acct_A closes it.
func TestConnectWebhooksChangeOnlyTheirTenantsOperations(t *testing.T) {
	t.Parallel()
	e := newConnectEnv(t, fake.StripeOptions{})
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Times: 1})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "checking" {
		t.Fatalf("%d %v, want checking", code, out)
	}
	opID := out["operation_id"].(string)
	before, _ := e.db.Get(context.Background(), opID)

	for _, h := range []struct{ secret, account, event, ref string }{
		{connectSecret, "acct_B", "evt_b", "re_from_b"},
		{hookSecret, "", "evt_platform", "re_from_platform"},
	} {
		payload, sig := signedFrom(t, h.secret, h.account, h.event, opID, h.ref)
		if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != ops.OutcomeForeignAccount {
			t.Fatalf("%s: %d %v, want 200 %s", h.event, code, out, ops.OutcomeForeignAccount)
		}
		if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "replayed" {
			t.Fatalf("%s again: %d %v", h.event, code, out)
		}
		if n := e.count(t, `SELECT count(*) FROM provider_events WHERE event_id = $1 AND outcome = $2 AND operation_id IS NULL`, h.event, ops.OutcomeForeignAccount); n != 1 {
			t.Fatalf("%s: %d event rows recorded as foreign and tied to no operation, want 1", h.event, n)
		}
		if n := e.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1 AND operation_id IS NULL`, h.ref); n != 1 {
			t.Fatalf("%s: the charge is tied to the operation", h.event)
		}
	}
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusUnknown || op.Version != before.Version {
		t.Fatalf("another account's webhook changed the operation: %s v%d", op.Status, op.Version)
	}
	if n := e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'webhook'`, opID); n != 0 {
		t.Fatalf("%d webhook evidence rows from other accounts", n)
	}
	payload, sig := signedFrom(t, "whsec_someone_else", "acct_A", "evt_unsigned", opID, "re_x")
	if code, _ := e.hook(t, payload, sig); code != 401 {
		t.Fatalf("an event signed with neither secret: %d, want 401", code)
	}

	payload, sig = signedFrom(t, connectSecret, "acct_A", "evt_a", opID, "re_from_a")
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "closed" {
		t.Fatalf("acct_A's webhook: %d %v", code, out)
	}
	op, _ := e.db.Get(context.Background(), opID)
	if op.Status != ops.StatusSucceeded || op.ProviderRef != "re_from_a" || op.ClosedBy != "stripe webhook" {
		t.Fatalf("after acct_A's webhook: %s %s by %q", op.Status, op.ProviderRef, op.ClosedBy)
	}
}

// TestConnectedRefundFailsThroughItsAccountsWebhook: a pending refund the bound tenant made
// in acct_A fails there later; the fake's own refund.updated event, which names acct_A,
// makes the operation failed after success.
func TestConnectedRefundFailsThroughItsAccountsWebhook(t *testing.T) {
	t.Parallel()
	e := newConnectEnv(t, fake.StripeOptions{PendingRefunds: true})
	e.fake.SetWebhookURL(e.url + "/webhooks/stripe")
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refund_pending" {
		t.Fatalf("%d %v, want refund_pending", code, out)
	}
	opID := out["operation_id"].(string)
	if err := e.fake.SetRefundStatus(out["refund_id"].(string), "failed", "declined"); err != nil {
		t.Fatal(err)
	}
	op, _ := e.db.Get(context.Background(), opID)
	for deadline := time.Now().Add(10 * time.Second); op.Status != ops.StatusFailed && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		op, _ = e.db.Get(context.Background(), opID)
	}
	if op.Status != ops.StatusFailed {
		t.Fatalf("after acct_A failed the refund the operation is %s", op.Status)
	}
	for _, ev := range e.fake.Events() {
		if !strings.Contains(string(ev.Payload), `"account":"acct_A"`) {
			t.Fatalf("the fake's event %s does not name acct_A", ev.Type)
		}
	}
}
