package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// The tests below send real requests to every documented route of a real server (Postgres,
// the fakes behind it) and validate each request and answer against the OpenAPI document:
// successes and the main problems, so that neither can change without the document.

func TestOpenAPIRefundsOperationsWhoami(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	e := newRefundEnv(t)
	auth := []string{"Authorization", "Bearer " + e.token, "Content-Type", "application/json"}
	refunds := e.url + "/api/v1/refunds"

	c.want(t, apiCall{method: http.MethodGet, url: e.url + "/api/v1/whoami", hdr: auth[:2]}, 200, "")
	c.want(t, apiCall{method: http.MethodGet, url: e.url + "/api/v1/whoami", offDoc: true}, 401, "unauthorized")
	c.want(t, apiCall{method: http.MethodGet, url: e.url + "/api/v1/whoami", hdr: []string{"Authorization", "Bearer stl_nope"}}, 401, "unauthorized")

	out := c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: append(auth, "X-Request-Ref", "toolu_01"), body: storyBody}, 200, "")
	if out["status"] != "refunded" {
		t.Fatalf("refund: %v", out)
	}
	again := c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: storyBody}, 200, "")
	if again["operation_id"] != out["operation_id"] {
		t.Fatalf("the repeat is another operation: %v", again)
	}
	failed := `{"order_id":"4418","amount_cents":100,"currency":"usd","payment_intent":"pi_nope"}`
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: failed}, 422, "unknown_payment")
	over := `{"order_id":"4419","amount_cents":9900,"currency":"usd","payment_intent":"pi_4417"}`
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: over}, 422, "amount_over_remainder")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: `{"order_id":"1","currency":"usd","payment_intent":"pi_4417"}`, offDoc: true}, 422, "missing_field")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: `{"order_id":"1","amount_cents":1.5}`, offDoc: true}, 422, "invalid_field")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: `{"order_id":`, offDoc: true}, 400, "malformed_json")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: []string{"Authorization", "Bearer " + e.token, "Content-Type", "text/plain"}, body: storyBody, offDoc: true}, 415, "unsupported_media_type")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth, body: `{"order_id":"` + strings.Repeat("x", 1<<20) + `"}`, offDoc: true}, 413, "body_too_large")
	c.want(t, apiCall{method: http.MethodPost, url: refunds, hdr: auth[2:], body: storyBody, offDoc: true}, 401, "unauthorized")

	op := c.want(t, apiCall{method: http.MethodGet, url: e.url + "/api/v1/operations/" + out["operation_id"].(string), hdr: auth[:2]}, 200, "")
	if op["status"] != "succeeded" {
		t.Fatalf("operation: %v", op)
	}
	c.want(t, apiCall{method: http.MethodGet, url: e.url + "/api/v1/operations/op_nope", hdr: auth[:2]}, 404, "not_found")
}

func TestOpenAPIJobs(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	e := newJobsEnv(t)
	auth := []string{"Authorization", "Bearer " + e.token, "Content-Type", "application/json"}
	jobsURL := e.url + "/api/v1/jobs"

	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: auth, body: jobJSON}, 400, "missing_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: append(auth, "Idempotency-Key", `"unterminated`), body: jobJSON}, 400, "invalid_idempotency_key")
	keyed := append(auth, "Idempotency-Key", "k1", "X-Request-Ref", "run-7")
	out := c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: keyed, body: jobJSON}, 202, "")
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: keyed, body: jobJSON}, 200, "")
	other := strings.Replace(jobJSON, `"v1"`, `"v2"`, 1)
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: keyed, body: other}, 422, "idempotency_key_reused")
	huge := strings.Replace(jobJSON, `"fast"`, `"huge"`, 1)
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: append(auth, "Idempotency-Key", "k9"), body: huge}, 422, "unknown_model_profile")
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: append(auth, "Idempotency-Key", "k8"), body: `{"document":{},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`}, 422, "invalid_document")
	c.want(t, apiCall{method: http.MethodPost, url: jobsURL, hdr: append(auth[2:], "Idempotency-Key", "k1"), body: jobJSON, offDoc: true}, 401, "unauthorized")

	id := out["job_id"].(string)
	queued := c.want(t, apiCall{method: http.MethodGet, url: jobsURL + "/" + id, hdr: auth[:2]}, 200, "")
	if queued["status"] != "queued" {
		t.Fatalf("before the worker: %v", queued)
	}
	for n := 1; n > 0; {
		var err error
		if n, err = e.worker.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	job := c.want(t, apiCall{method: http.MethodGet, url: jobsURL + "/" + id, hdr: auth[:2]}, 200, "")
	if job["status"] != "published" {
		t.Fatalf("after the worker: %v", job)
	}
	c.want(t, apiCall{method: http.MethodGet, url: jobsURL + "/job_nope", hdr: auth[:2]}, 404, "not_found")
}

func TestOpenAPIChatCompletions(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	w := newLLMWorld(t, llmSetup{})
	auth := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "application/json"}
	chat := w.url + "/v1/chat/completions"
	body := chatBody("Where is order 4417?", 0.2, false)
	keyed := append(auth, "Idempotency-Key", `"chat-1"`, "X-Request-Ref", "turn-1", "Settle-Chat-Ref", "chat-4417", "Prefer", "wait=5")

	resp, _ := c.do(t, apiCall{method: http.MethodPost, url: chat, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Settle-Operation-Id") == "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = c.do(t, apiCall{method: http.MethodPost, url: chat, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	stream := append(auth, "Idempotency-Key", "chat-2", "X-Client-Request-Id", "req-2")
	resp, sse := c.do(t, apiCall{method: http.MethodPost, url: chat, hdr: stream, body: chatBody("And 4418?", 0.2, true)})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(sse), "[DONE]") {
		t.Fatalf("stream: %d %v %s", resp.StatusCode, resp.Header, sse)
	}

	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: keyed, body: chatBody("Where is order 4417?", 0.9, false)}, 422, "idempotency_key_reused")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: auth, body: body}, 400, "missing_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: append(auth, "Idempotency-Key", "a", "Idempotency-Key", "b"), body: body}, 400, "invalid_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: append(auth, "Idempotency-Key", "chat-3"), body: `{"model":`, offDoc: true}, 400, "malformed_json")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: append(auth, "Idempotency-Key", "chat-4"), body: `{"model":"fake-small"}`, offDoc: true}, 400, "invalid_request")
	plain := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "text/plain", "Idempotency-Key", "chat-5"}
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: plain, body: body, offDoc: true}, 415, "unsupported_media_type")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: append(auth[2:], "Idempotency-Key", "chat-6"), body: body, offDoc: true}, 401, "unauthorized")
}

func TestOpenAPIEmbeddings(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	w := newLLMWorld(t, llmSetup{})
	auth := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "application/json"}
	url := w.url + "/v1/embeddings"
	body := `{"model":"text-embedding-3-small","input":["Where is order 4417?","And 4418?"],"dimensions":64}`
	keyed := append(auth, "Idempotency-Key", `"emb-1"`, "X-Request-Ref", "turn-1", "Prefer", "wait=5")

	resp, _ := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Settle-Operation-Id") == "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: strings.Replace(body, "64", "128", 1)}, 422, "idempotency_key_reused")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: auth, body: body}, 400, "missing_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "a", "Idempotency-Key", "b"), body: body}, 400, "invalid_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "emb-2"), body: `{"model":"text-embedding-3-small","input":[]}`, offDoc: true}, 400, "invalid_request")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth[2:], "Idempotency-Key", "emb-3"), body: body, offDoc: true}, 401, "unauthorized")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/embeddings", Kind: fake.LLMFaultGarbage})
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "emb-4"), body: body}, 502, "upstream_bad_response")
}

func TestOpenAPIResponses(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	w := newLLMWorld(t, llmSetup{})
	auth := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "application/json"}
	url := w.url + "/v1/responses"
	body := `{"model":"fake-small","instructions":"answer as support","input":"Where is order 4417?"}`
	keyed := append(auth, "Idempotency-Key", `"resp-1"`, "X-Request-Ref", "turn-1", "Settle-Chat-Ref", "chat-4417", "Prefer", "wait=5")

	resp, _ := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Settle-Operation-Id") == "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	stream := append(auth, "Idempotency-Key", "resp-2")
	resp, sse := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: stream, body: `{"model":"fake-small","input":"And 4418?","stream":true}`})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(sse), "event: response.completed") {
		t.Fatalf("stream: %d %v %s", resp.StatusCode, resp.Header, sse)
	}
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: strings.Replace(body, "support", "a pirate", 1)}, 422, "idempotency_key_reused")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: auth, body: body}, 400, "missing_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "a", "Idempotency-Key", "b"), body: body}, 400, "invalid_idempotency_key")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "resp-3"), body: `{"model":"fake-small","input":"x","background":true,"store":false}`, offDoc: true}, 400, "invalid_request")
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth[2:], "Idempotency-Key", "resp-4"), body: body, offDoc: true}, 401, "unauthorized")

	// A background response, read again at GET /v1/responses/{id}: as JSON, as its stream
	// after a sequence number; an id of no call of this tenant's is not found.
	resp, created := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "resp-bg"), body: `{"model":"fake-small","input":"And 4419?","background":true}`})
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if _ = json.Unmarshal(created, &r); resp.StatusCode != 200 || r.ID == "" || r.Status != "queued" {
		t.Fatalf("background: %d %s", resp.StatusCode, created)
	}
	bearer := auth[:2]
	resp, sse = c.do(t, apiCall{method: http.MethodGet, url: url + "/" + r.ID + "?stream=true&starting_after=2", hdr: bearer})
	if resp.StatusCode != 200 || !strings.Contains(string(sse), "event: response.completed") || strings.Contains(string(sse), "event: response.created") {
		t.Fatalf("read as a stream: %d %s", resp.StatusCode, sse)
	}
	resp, got := c.do(t, apiCall{method: http.MethodGet, url: url + "/" + r.ID, hdr: bearer})
	if _ = json.Unmarshal(got, &r); resp.StatusCode != 200 || r.Status != "completed" {
		t.Fatalf("read: %d %s", resp.StatusCode, got)
	}
	c.want(t, apiCall{method: http.MethodGet, url: url + "/resp_none", hdr: bearer}, 404, "not_found")
	c.want(t, apiCall{method: http.MethodGet, url: url + "/" + r.ID + "?stream=true&starting_after=-1", hdr: bearer, offDoc: true}, 400, "invalid_request")
	// Cancelled through Settle: a completed response is the provider's to refuse, one held
	// in the queue is cancelled, an id of no call of this tenant's is not found.
	c.want(t, apiCall{method: http.MethodPost, url: url + "/" + r.ID + "/cancel", hdr: bearer}, 400, "upstream_refused")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 2 * time.Second, Times: 1})
	_, held := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "resp-held"), body: `{"model":"fake-small","input":"And 4420?","background":true}`})
	if _ = json.Unmarshal(held, &r); r.Status != "queued" {
		t.Fatalf("held: %s", held)
	}
	if out := c.want(t, apiCall{method: http.MethodPost, url: url + "/" + r.ID + "/cancel", hdr: bearer}, 200, ""); out["status"] != "cancelled" {
		t.Fatalf("cancel: %v", out)
	}
	c.want(t, apiCall{method: http.MethodPost, url: url + "/resp_none/cancel", hdr: bearer}, 404, "not_found")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultGarbage})
	c.want(t, apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "resp-5"), body: body}, 502, "upstream_bad_response")
}

// TestOpenAPIChatProblems covers the gateway's answers that need the provider's help: a
// key still running (409 with Retry-After) and a provider answering garbage (502).
func TestOpenAPIChatProblems(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	w := newLLMWorld(t, llmSetup{latency: 500 * time.Millisecond})
	auth := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "application/json"}
	chat := w.url + "/v1/chat/completions"
	body := chatBody("Where is order 4417?", 0.2, false)
	keyed := append(auth, "Idempotency-Key", "slow-1")

	first := make(chan struct{})
	go func() {
		// Not w.post: a goroutine other than the test's may not call t.Fatal.
		defer close(first)
		req, _ := http.NewRequest(http.MethodPost, chat, strings.NewReader(body))
		for i := 0; i+1 < len(keyed); i += 2 {
			req.Header.Set(keyed[i], keyed[i+1])
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	w.waitAdmitted(t, "slow-1")
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: keyed, body: body}, 409, "idempotency_key_in_use")
	<-first

	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultGarbage})
	c.want(t, apiCall{method: http.MethodPost, url: chat, hdr: append(auth, "Idempotency-Key", "garbage-1"), body: body}, 502, "upstream_bad_response")
}

// TestOpenAPIMessages: Anthropic's Messages API as the document says, its errors in
// Anthropic's shape with Settle's code in error.details.error_code.
func TestOpenAPIMessages(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	w := newMessagesWorld(t, 0)
	auth := []string{"x-api-key", w.tokens["shop"], "Content-Type", "application/json"}
	url := w.url + "/v1/messages"
	body := `{"model":"claude-haiku-4-5","max_tokens":32,"system":"answer as support","messages":[{"role":"user","content":"Where is order 4417?"}]}`
	keyed := append(auth, "Idempotency-Key", `"msg-1"`, "X-Request-Ref", "turn-1", "Settle-Chat-Ref", "chat-4417", "Prefer", "wait=5",
		"anthropic-version", "2023-06-01")
	// wantError checks an Anthropic-shaped error: its status and Settle's code.
	wantError := func(k apiCall, status int, code string) {
		t.Helper()
		resp, b := c.do(t, k)
		var e struct {
			Error struct {
				Details struct {
					ErrorCode string `json:"error_code"`
				} `json:"details"`
			} `json:"error"`
		}
		if _ = json.Unmarshal(b, &e); resp.StatusCode != status || e.Error.Details.ErrorCode != code {
			t.Fatalf("%s: got %d %s; want %d %s", k.url, resp.StatusCode, b, status, code)
		}
	}

	resp, _ := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Settle-Operation-Id") == "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = c.do(t, apiCall{method: http.MethodPost, url: url, hdr: keyed, body: body})
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	bearer := []string{"Authorization", "Bearer " + w.tokens["shop"], "Content-Type", "application/json", "Idempotency-Key", "msg-2"}
	resp, sse := c.do(t, apiCall{method: http.MethodPost, url: url, hdr: bearer,
		body: `{"model":"claude-haiku-4-5","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"And 4418?"}]}`})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.HasPrefix(string(sse), "event: message_start\n") || !strings.Contains(string(sse), "event: message_stop") {
		t.Fatalf("stream: %d %v %s", resp.StatusCode, resp.Header, sse)
	}
	wantError(apiCall{method: http.MethodPost, url: url, hdr: append(keyed, "anthropic-beta", "context-1m-2025-08-07"), body: body}, 422, "idempotency_key_reused")
	wantError(apiCall{method: http.MethodPost, url: url, hdr: auth, body: body}, 400, "missing_idempotency_key")
	wantError(apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "a", "Idempotency-Key", "b"), body: body}, 400, "invalid_idempotency_key")
	wantError(apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "msg-3"),
		body: `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"x"}]}`, offDoc: true}, 400, "invalid_request")
	wantError(apiCall{method: http.MethodPost, url: url, hdr: append(auth[2:], "Idempotency-Key", "msg-4"), body: body, offDoc: true}, 401, "unauthorized")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultGarbage})
	wantError(apiCall{method: http.MethodPost, url: url, hdr: append(auth, "Idempotency-Key", "msg-5"), body: body}, 502, "upstream_bad_response")
}
