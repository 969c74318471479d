package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestACallClosedFromAResponseThatEndedWithoutAnswerNamesIt is the attack of a background
// response cancelled through Settle while the provider still held it queued: the lookup that
// closed its call as failed kept the response id in its evidence only, and left the
// operation's provider_ref empty, since the provider billed nothing for it. The operation's
// page and the reconciler, which read provider_ref, then could not name the response the
// provider holds for the call. A close from the provider's record of a response that ended
// without an answer names it as the operation's provider reference, billed or not (a response
// failed or cancelled part-way, which the provider billed, was named already:
// TestACloseByHandWithAResponseTheProviderFailedIsRefused, TestCancelBackgroundResponseThroughSettle).
// ops rule 9
func TestACallClosedFromAResponseThatEndedWithoutAnswerNamesIt(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	c := w.sdk("shop")
	noRetry := option.WithMaxRetries(0)

	key := "ref-cancel-queued"
	// The provider holds the response queued past the cancel.
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	created, err := c.Responses.New(ctx, backgrounded("classify document 51"), keyed(key), noRetry)
	if err != nil || created.Status != "queued" {
		t.Fatalf("created: %v %+v", err, created)
	}
	got, err := c.Responses.Cancel(ctx, created.ID, noRetry)
	if err != nil || got.Status != "cancelled" || got.Usage.TotalTokens != 0 {
		t.Fatalf("cancel through Settle: %v %+v", err, got)
	}
	op := w.waitStatus(t, key, ops.StatusFailed)
	if op.ProviderRef != created.ID || op.CostMicros != 0 {
		t.Errorf("the failed operation names %q as its provider reference (cost %d); want the cancelled response %s",
			op.ProviderRef, op.CostMicros, created.ID)
	}
	var evRef string
	if err := w.db.Pool.QueryRow(ctx, `SELECT provider_ref FROM evidence WHERE operation_id = $1`, op.ID).Scan(&evRef); err != nil || evRef != created.ID {
		t.Errorf("the close's evidence names %q (%v); want %s", evRef, err, created.ID)
	}
}

// TestAnExpiredCallClosedFromItsCancelledResponseNamesIt: a background response cancelled at
// the provider while still queued, not through Settle, leaves its call unknown once the
// client's retry is refused, and past the key's retention the call expires. The client's
// read of the response through Settle then closes the call as failed from the provider's
// record, and the close names the response as the operation's provider reference, though
// the provider billed nothing for it.
// ops rule 9
func TestAnExpiredCallClosedFromItsCancelledResponseNamesIt(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	c := w.sdk("shop")
	noRetry := option.WithMaxRetries(0)
	key := "ref-expired"
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	p := backgrounded("classify document 53")
	created, err := c.Responses.New(ctx, p, keyed(key), noRetry)
	if err != nil || created.Status != "queued" {
		t.Fatalf("created: %v %+v", err, created)
	}
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	if got, err := up.Responses.Cancel(ctx, created.ID); err != nil || got.Status != "cancelled" || got.Usage.TotalTokens != 0 {
		t.Fatalf("cancel at the provider: %v %+v", err, got)
	}
	for deadline := time.Now().Add(10 * time.Second); w.count(t, `SELECT count(*) FROM attempts a JOIN operations o ON o.id = a.operation_id
		WHERE o.intent_key = $1 AND a.error_code = 'response_cancelled' AND o.lease_until <= now()`, key) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the request following %s never gave it up", created.ID)
		}
	}
	if _, err := c.Responses.New(ctx, p, keyed(key), noRetry); err == nil {
		t.Fatal("the retry of a cancelled response was answered")
	}
	w.waitStatus(t, key, ops.StatusUnknown)
	w.clock.Advance(60 * 24 * time.Hour)
	if n, err := ops.NewLedger(w.db, w.clock).ExpireDue(ctx, "test"); err != nil || n != 1 {
		t.Fatalf("expired %d operations: %v", n, err)
	}
	w.waitStatus(t, key, ops.StatusExpired)
	if read, err := c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}, noRetry); err != nil || read.Status != "cancelled" {
		t.Fatalf("read: %v %+v", err, read)
	}
	op := w.waitStatus(t, key, ops.StatusFailed)
	if op.ProviderRef != created.ID || op.CostMicros != 0 {
		t.Errorf("the expired call closed as failed names %q as its provider reference (cost %d); want the cancelled response %s",
			op.ProviderRef, op.CostMicros, created.ID)
	}
}
