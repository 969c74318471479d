package llm_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// TestGatewayCancelsOnlyTheTenantsOwnResponseOnce: Gateway.Cancel forwards a cancel to the
// provider only for a response one of the tenant's own calls created: another tenant's id is
// not found and nothing is sent. The tenant's own is cancelled with one request to the
// provider, its answer relayed, and the operation settles as failed with what the provider
// billed for the response; the key then answers with that failure and nothing is generated
// again (ops rules 3, 9 and 11).
func TestGatewayCancelsOnlyTheTenantsOwnResponseOnce(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	body := `{"model":"fake-small","input":"draft the reply to ticket 60","max_output_tokens":24,"background":true}`
	// The create call answers at once with the queued response and goes on following it,
	// as web's handler does after the connection closed.
	first := make(chan []byte, 1)
	followed := make(chan error, 1)
	go func() {
		created := &reply{written: func(p []byte) {
			select {
			case first <- append([]byte(nil), p...):
			default:
			}
		}}
		_, err := w.callInto(created, w.gw, "/v1/responses", "shop", "bg-cancel", body, "")
		followed <- err
	}()
	var answer []byte
	select {
	case answer = <-first:
	case err := <-followed:
		t.Fatalf("the create call ended without an answer: %v", err)
	}
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Usage  *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(answer, &r); err != nil || r.ID == "" {
		t.Fatalf("created %s: %v", answer, err)
	}
	id := r.ID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, err := w.up.GetResponse(ctx, id); err == nil && s.Status == "in_progress" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("response %s never started", id)
		}
	}

	out := &reply{}
	err := w.gw.Cancel(ctx, llm.Cancellation{Tenant: w.tenants["bank"], ID: id}, out)
	if ops.ErrorCode(err) != ops.ENOTFOUND || out.began || len(w.fake.Cancels()) != 0 {
		t.Fatalf("another tenant's cancel: %v, answered %v, forwarded %v", err, out.began, w.fake.Cancels())
	}

	out = &reply{}
	if err := w.gw.Cancel(ctx, llm.Cancellation{Tenant: w.tenants["shop"], ID: id}, out); err != nil {
		t.Fatalf("the tenant's cancel: %v", err)
	}
	if err := json.Unmarshal(out.body.Bytes(), &r); err != nil || r.ID != id || r.Status != "cancelled" || r.Usage == nil || r.Usage.InputTokens == 0 {
		t.Fatalf("cancelled: %s (%v)", out.body.String(), err)
	}
	if c := w.fake.Cancels(); len(c) != 1 || c[0] != id || out.head.OperationID == "" {
		t.Fatalf("forwarded %v, operation %q", c, out.head.OperationID)
	}
	if err := <-followed; err != nil {
		t.Fatalf("the create call after the cancel: %v", err)
	}
	op := w.waitStatus(t, "bg-cancel", ops.StatusFailed)
	if op.CostMicros <= 0 || op.ProviderRef != id {
		t.Fatalf("operation %s %s cost %d", op.Status, op.ProviderRef, op.CostMicros)
	}
	if _, err := w.callOn(w.gw, "/v1/responses", "shop", "bg-cancel", body, ""); err == nil {
		t.Fatal("the key of a cancelled response answered as if it succeeded")
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 1 {
		t.Fatalf("the provider generated %d responses, want 1", n)
	}
}
