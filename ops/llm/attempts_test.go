package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// A provider 500 may have billed (providers keep no key), so the gateway's resend within
// the call is counted as a possible duplicate; the client made one request and got one
// generation.
func TestLLMResendAfterAnUpstream500IsCounted(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultServerError, Calls: []int{1}})
	r, err := w.call("shop", "reply-1", chatBody("draft the reply", 0.2, false))
	_, content := completion(t, r, err)
	gens := w.generations(t, 1) // one successful generation billed for the intent
	op := w.op(t, "reply-1")
	if content != gens[0].Content || op.Status != ops.StatusSucceeded {
		t.Fatalf("client got %q, operation %s", content, op.Status)
	}
	// The 500 may have billed (providers keep no key), so the resend is counted.
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND error_code = 'upstream_500'`, op.ID); n != 1 {
		t.Fatalf("%d attempts recorded the 500", n)
	}
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, op.ID); n != 2 || w.gw.Stats().PossibleDuplicates != 1 {
		t.Fatalf("%d attempts, stats %+v", n, w.gw.Stats())
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d client requests", n)
	}
}

// An answer of the provider that is not a chat completion is a bad response (which web
// answers 502): every attempt of the call is recorded, and the operation is left for the
// client's retry; a batch stream gets one attempt, then is unknown.
func TestLLMUpstreamGarbageIsABadResponseWithAttemptsRecorded(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultGarbage})
	r, err := w.call("shop", "g-1", chatBody("hello", 0.2, false))
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonBadResponse)
	op := w.op(t, "g-1")
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND error_code = 'upstream_bad_response' AND http_status = 200`, op.ID); n != 3 {
		t.Fatalf("%d garbage attempts recorded, want the call's 3", n)
	}
	if op.Status != ops.StatusInProgress || op.LeaseUntil == nil || op.LeaseUntil.After(w.clock.Now()) {
		t.Fatalf("operation %s lease %v: want in progress and released for the client's retry", op.Status, op.LeaseUntil)
	}
	// Streaming, batch: one attempt, then unknown.
	r, err = w.call("pipeline", "g-2", chatBody("hello", 0.2, true))
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonBadResponse)
	if op := w.op(t, "g-2"); op.Status != ops.StatusUnknown || op.Attempts != 1 {
		t.Fatalf("batch operation %s after %d attempts", op.Status, op.Attempts)
	}
}

// The provider's stream breaks in the middle: the client gets what came and an error
// event, never [DONE]; its retry with the key goes on with the same operation and is
// counted as a possible duplicate.
func TestLLMBrokenStreamThenRetry(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream, Calls: []int{1}, Chunk: 5})
	r, err := w.call("shop", "b-1", chatBody("hello", 0.2, true))
	b := r.body.String()
	if err != nil || !r.head.Stream || strings.Contains(b, "[DONE]") || !strings.Contains(b, `"code":"upstream_error"`) {
		t.Fatalf("got %v %+v %s", err, r.head, b)
	}
	if n := strings.Count(b, "chat.completion.chunk"); n != 5 {
		t.Fatalf("%d chunks before the break, want 5", n)
	}
	op := w.op(t, "b-1")
	if op.Status != ops.StatusInProgress || w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND error_code = 'stream_broken'`, op.ID) != 1 {
		t.Fatalf("operation %s after the break", op.Status)
	}
	r, err = w.call("shop", "b-1", chatBody("hello", 0.2, true))
	text, _, done := streamText(t, r)
	gens := w.generations(t, 2)
	if err != nil || !done || text != gens[1].Content {
		t.Fatalf("retry streamed %q (done %v, %v), provider %q", text, done, err, gens[1].Content)
	}
	if op := w.op(t, "b-1"); op.Status != ops.StatusSucceeded || op.ProviderRef != gens[1].ID {
		t.Fatalf("operation %s %s", op.Status, op.ProviderRef)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'retried'`); n != 1 || w.gw.Stats().PossibleDuplicates != 1 {
		t.Fatalf("%d retried requests, stats %+v", n, w.gw.Stats())
	}
}

// A tenant that does not require an Idempotency-Key gets one generation per request sent
// without one: each is its own intent.
func TestLLMTenantWithoutRequiredKeysGetsOneGenerationPerRequest(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	for range 2 {
		r, err := w.call("open", "", chatBody("hello", 0.2, false))
		completion(t, r, err)
	}
	w.generations(t, 2)
}

// A model missing from the price table is accepted: its usage is recorded and its cost is
// unknown, never guessed.
func TestLLMModelMissingFromThePriceTableHasAnUnknownCost(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	r, err := w.call("shop", "k-mystery", strings.Replace(chatBody("hello", 0.2, false), "fake-small", "mystery-7b", 1))
	completion(t, r, err)
	op := w.op(t, "k-mystery")
	var u struct {
		CostKnown    bool `json:"cost_known"`
		PromptTokens int  `json:"prompt_tokens"`
	}
	_ = json.Unmarshal(op.Usage, &u)
	if op.Status != ops.StatusSucceeded || u.CostKnown || u.PromptTokens == 0 || op.CostMicros != 0 {
		t.Fatalf("operation %s usage %s cost %d", op.Status, op.Usage, op.CostMicros)
	}
}
