package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// A tenant's call to an API of the gateway no provider serves here (Anthropic's Messages on a
// server configured with an OpenAI-compatible provider only) is refused with 404, sends
// nothing, and is recorded once as the tenant's client request (ops rule 8), as every other
// refused call is.
func TestACallToAnUnservedAPIIsRecordedOnce(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/messages",
		strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Idempotency-Key", "unserved-1")
	req.Header.Set("X-Request-Ref", "unserved-ref")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("messages without an Anthropic provider: %d, want 404", resp.StatusCode)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE kind = 'llm_call' AND answer = 'rejected'
	AND request_ref = 'unserved-ref' AND operation_id IS NULL`); n != 1 {
		t.Fatalf("%d refused requests recorded, want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened by a refused call", n)
	}
	w.generations(t, 0)
}
