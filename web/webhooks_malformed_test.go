package web_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestWebhookBodyThatIsNoEventIsTheSendersFault: a sender holding the signing secret
// signs a body that is not JSON. The signature verifies, so the answer must not say it
// does not (Stripe's dashboard would send the operator looking for a wrong secret): it is
// 422 bad_event as problem+json, and nothing is recorded or changed. A body of 10 MB is refused at its
// first MiB with 413, before its signature is checked.
// ops rule 12: no answer says more than Settle knows.
func TestWebhookBodyThatIsNoEventIsTheSendersFault(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Times: 1})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "checking" {
		t.Fatalf("%d %v, want checking", code, out)
	}
	opID := out["operation_id"].(string)

	payload := []byte(`{"id":"evt_cut","object":"event","type":"refund.created","data":{"object":{"id":"re_x"`)
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: hookSecret, Timestamp: time.Now()}).Header
	code, problem := e.hook(t, payload, sig)
	if code != http.StatusUnprocessableEntity || problem["code"] != "bad_event" {
		t.Fatalf("a signed body that is not JSON: %d %v, want 422 bad_event as problem+json", code, problem)
	}

	huge := bytes.Repeat([]byte(" "), 10<<20)
	hugeSig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: huge, Secret: hookSecret, Timestamp: time.Now()}).Header
	if code, _ := e.hook(t, huge, hugeSig); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of 10 MB: %d, want 413", code)
	}
	if n := e.count(t, `SELECT count(*) FROM provider_events`); n != 0 {
		t.Fatalf("%d events recorded from bodies that are no event", n)
	}
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusUnknown {
		t.Fatalf("a body that is no event changed the operation to %s", op.Status)
	}
}
