package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// The names a budget's output cap is told by: the refusal's reason and the header of a
// call sent with the cap Settle set.
const (
	reasonTooSmall  = "llm_budget_too_small"
	outputCapHeader = "Settle-Output-Cap"
)

// capPost sends a raw request of route for tenant with key, and returns the answer's
// status, headers and body.
func (w *budgetWorld) capPost(t *testing.T, tenant, route, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.url+route, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	if route == llm.MessagesRoute {
		req.Header.Set("X-Api-Key", w.tokens[tenant])
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// refusedCount is how many of the tenant's requests were recorded as refused.
func (w *budgetWorld) refusedCount(t *testing.T, tenant string) int {
	t.Helper()
	return w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, w.tenants[tenant].ID)
}

// capChat is a chat completion of the dearest model of the fake LLM with extra members
// (such as `"max_completion_tokens":100000`), "" for none.
func capChat(extra string) string {
	b := `{"model":"fake-large","messages":[{"role":"user","content":"Write a long product description for item 7."}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// TestAnOutputCapTheBudgetCannotPayIsRefusedAndSendsNothing is the attack of a tenant with
// two cents left that names an output cap of 100,000 tokens on the dearest model: admitted on
// its spend alone, the call would be billed dollars. On every route that takes a cap (chat
// completions' max_completion_tokens and max_tokens, the Responses API's max_output_tokens,
// the Messages API's max_tokens) the call is refused with 429 llm_budget_too_small and a
// Retry-After until midnight UTC, its message naming the call's worst case, what is left and
// the largest cap that fits; it is recorded as the tenant's refused request and reaches no
// provider. The same call with a cap that fits is sent.
// ops rule 8
// ops rule 12
func TestAnOutputCapTheBudgetCannotPayIsRefusedAndSendsNothing(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	// Two cents: each case's call that fits costs what it is sent with, up to 0.0033, and
	// counts against what is left once it ended, so the budget pays for all five.
	w.budget(t, "shop", 20_000)
	claude := func(maxTokens int) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":` + strconv.Itoa(maxTokens) +
			`,"messages":[{"role":"user","content":"Write a long product description for item 7."}]}`
	}
	resp := func(extra string) string {
		return `{"model":"fake-large","input":"Write a long product description for item 7."` + extra + `}`
	}
	cases := []struct {
		name, route, field, big, small string
	}{
		{"chat max_completion_tokens", "/v1/chat/completions", "max_completion_tokens", capChat(`"max_completion_tokens":100000`), capChat(`"max_completion_tokens":200`)},
		{"chat max_tokens", "/v1/chat/completions", "max_tokens", capChat(`"max_tokens":100000`), capChat(`"max_tokens":200`)},
		{"chat n choices", "/v1/chat/completions", "max_completion_tokens", capChat(`"max_completion_tokens":900,"n":8`), capChat(`"max_completion_tokens":200,"n":2`)},
		{"responses", "/v1/responses", "max_output_tokens", resp(`,"max_output_tokens":100000`), resp(`,"max_output_tokens":200`)},
		{"messages", llm.MessagesRoute, "max_tokens", claude(100000), claude(100)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent, refused := w.posts(), w.refusedCount(t, "shop")
			status, h, body := w.capPost(t, "shop", c.route, "big-"+strconv.Itoa(i), c.big)
			retry, _ := strconv.Atoi(h.Get("Retry-After"))
			resets := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour))
			if status != http.StatusTooManyRequests || !strings.Contains(body, reasonTooSmall) {
				t.Fatalf("a cap the two cents left cannot pay: %d %.300s; want 429 %s", status, body, reasonTooSmall)
			}
			if d := time.Duration(retry) * time.Second; d < resets-time.Minute || d > resets+time.Minute {
				t.Errorf("Retry-After %q, want the time until midnight UTC (%s)", h.Get("Retry-After"), resets)
			}
			for _, want := range []string{"may cost up to", "left of", "largest " + c.field, "nothing of it was sent"} {
				if !strings.Contains(body, want) {
					t.Errorf("the refusal does not say %q: %s", want, body)
				}
			}
			if got := w.posts() - sent; got != 0 {
				t.Errorf("the refused call sent %d requests to the provider, want none", got)
			}
			if n := w.refusedCount(t, "shop") - refused; n != 1 {
				t.Errorf("%d refused requests recorded, want 1", n)
			}
			if status, _, body := w.capPost(t, "shop", c.route, "small-"+strconv.Itoa(i), c.small); status != http.StatusOK {
				t.Errorf("a cap that fits what is left: %d %.300s; want it sent", status, body)
			}
			if w.posts() == sent {
				t.Errorf("the call that fits reached no provider")
			}
		})
	}
}

// TestACallWithoutAnOutputCapIsSentWithTheCapItsBudgetPays is the attack of a tenant with a
// cent left that names no output cap: the provider would generate as long as the model
// goes. Settle sends the call with the largest cap what is left pays for (chat completions'
// max_completion_tokens, the Responses API's max_output_tokens) and says so in
// Settle-Output-Cap; the fake provider got that cap. The operation keeps the fingerprint of
// what the client sent, so the retry of the key with the same body is a replay that sends
// nothing (ops rules 1 and 2). A tenant without a budget is sent its body untouched, and
// its spend is never read.
// ops rule 8
func TestACallWithoutAnOutputCapIsSentWithTheCapItsBudgetPays(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank")
	cases := []struct{ name, route, body string }{
		{"chat", "/v1/chat/completions", capChat("")},
		{"chat stream", "/v1/chat/completions", capChat(`"stream":true`)},
		{"responses", "/v1/responses", `{"model":"fake-large","input":"Write a long product description for item 7."}`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "uncapped-" + strconv.Itoa(i)
			w.leave(t, "shop", 10_000) // a cent: the calls before spent theirs
			status, h, body := w.capPost(t, "shop", c.route, key, c.body)
			if status != http.StatusOK {
				t.Fatalf("a call without a cap: %d %s", status, body)
			}
			capSet, err := strconv.Atoi(h.Get(outputCapHeader))
			if err != nil || capSet < 16 {
				t.Fatalf("%s: %q, want the cap Settle set", outputCapHeader, h.Get(outputCapHeader))
			}
			gens := w.fake.Generations()
			if g := gens[len(gens)-1]; g.MaxOutputTokens != capSet {
				t.Errorf("the provider got the cap %d, want %d", g.MaxOutputTokens, capSet)
			}
			// What is left pays for the call's worst case: its body's bytes as input tokens at
			// fake-large's 2 micro-dollars, its cap at 8.
			if worst := int64(len(c.body))*2 + int64(capSet)*8; worst > 10_000 {
				t.Errorf("the cap %d lets the call cost up to %d micro-dollars, over the 10,000 left", capSet, worst)
			}
			op := w.tw.WaitStatus(t, key, ops.StatusSucceeded, 10*time.Second)
			if fp, body := storedOf(t, w, op.ID); fp != op.Fingerprint || !sameJSON(body, []byte(c.body)) {
				t.Errorf("the operation keeps another request than the client's: %s", op.Request)
			}
			sent := w.posts()
			status, h, _ = w.capPost(t, "shop", c.route, key, c.body)
			if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || w.posts() != sent {
				t.Errorf("the retry of the key: %d replayed %q, %d sent; want a replay that sends nothing", status, h.Get("Idempotent-Replayed"), w.posts()-sent)
			}
		})
	}
	reads := w.spends.reads.Load()
	status, h, body := w.capPost(t, "bank", "/v1/chat/completions", "bank-uncapped", capChat(""))
	gens := w.fake.Generations()
	if status != http.StatusOK || h.Get(outputCapHeader) != "" || gens[len(gens)-1].MaxOutputTokens != 0 {
		t.Errorf("a tenant without a budget: %d %s, cap %q; want its body sent untouched", status, body, h.Get(outputCapHeader))
	}
	if w.spends.reads.Load() != reads {
		t.Errorf("a tenant without a budget had its spend read")
	}
}

// storedOf is the body operation opID stores, and the fingerprint the gateway gives that
// body as a client's.
func storedOf(t *testing.T, w *budgetWorld, opID string) (string, []byte) {
	t.Helper()
	op, err := w.tw.DB.Get(t.Context(), opID)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Route string          `json:"route"`
		Body  json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(op.Request, &s); err != nil {
		t.Fatal(err)
	}
	if s.Route != "/v1/chat/completions" {
		return op.Fingerprint, s.Body // only chat completions' fingerprint is told by FingerprintBody
	}
	fp, err := llm.FingerprintBody(op.TenantID, s.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fp, s.Body
}

// sameJSON says a and b are one JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestACallWhoseInputAloneTheBudgetCannotPaySendsNothing is the attack of a tenant that
// sends a huge input: its cost is its input's, which no output cap bounds. An embeddings
// request whose body's bytes, as input tokens, cost more than what is left is refused with
// 429 llm_budget_too_small and reaches no provider, as is a chat completion without a cap
// whose input alone does not fit; a small embeddings request is sent.
// ops rule 8
// ops rule 12
func TestACallWhoseInputAloneTheBudgetCannotPaySendsNothing(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	w.budget(t, "shop", 100_000) // ten cents
	// A million bytes at text-embedding-3-large's 0.13 a million tokens: 0.13.
	huge := `{"model":"text-embedding-3-large","input":"` + strings.Repeat("refund ", 150_000) + `"}`
	sent := w.posts()
	status, _, body := w.capPost(t, "shop", "/v1/embeddings", "huge", huge)
	if status != http.StatusTooManyRequests || !strings.Contains(body, reasonTooSmall) || !strings.Contains(body, "input alone") {
		t.Errorf("a huge embeddings input: %d %.300s; want 429 %s saying its input alone does not fit", status, body, reasonTooSmall)
	}
	// 60,000 bytes at fake-large's 2 a million tokens: 0.12.
	long := capChat(`"max_completion_tokens":16,"temperature":0`)
	long = strings.Replace(long, "item 7.", "item 7. "+strings.Repeat("More. ", 10_000), 1)
	if status, _, body := w.capPost(t, "shop", "/v1/chat/completions", "long", long); status != http.StatusTooManyRequests || !strings.Contains(body, reasonTooSmall) {
		t.Errorf("a chat completion whose input alone does not fit: %d %.300s; want 429 %s", status, body, reasonTooSmall)
	}
	if got := w.posts() - sent; got != 0 {
		t.Errorf("the refused calls sent %d requests to the provider, want none", got)
	}
	if n := w.refusedCount(t, "shop"); n != 2 {
		t.Errorf("%d refused requests recorded, want 2", n)
	}
	if status, _, body := w.capPost(t, "shop", "/v1/embeddings", "small", `{"model":"text-embedding-3-large","input":"where is order 4417?"}`); status != http.StatusOK {
		t.Errorf("a small embeddings input: %d %s; want it sent", status, body)
	}
	if gens := w.fake.GenerationsOf(fake.APIEmbeddings); len(gens) != 1 {
		t.Errorf("%d embeddings generated, want the small one", len(gens))
	}
}
