package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// providerState reads response id at the provider itself, not through Settle.
func (w *llmWorld) providerState(t *testing.T, id string) *responses.Response {
	t.Helper()
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	r, err := up.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("the provider's response %s: %v", id, err)
	}
	return r
}

// waitGenerating waits until the provider's response id has left the queue and generated
// some of its output.
func (w *llmWorld) waitGenerating(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); w.providerState(t, id).Status != "in_progress"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider's response %s never started", id)
		}
	}
	time.Sleep(120 * time.Millisecond)
}

// waitOutput waits, following the provider's own stream of response id, until it has
// generated some of its output.
func (w *llmWorld) waitOutput(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	s := up.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{})
	defer s.Close()
	for s.Next() {
		if s.Current().Type == "response.output_text.delta" {
			return
		}
	}
	t.Fatalf("the provider's response %s generated no output: %v", id, s.Err())
}

// TestCancelBackgroundResponseThroughSettle: the official SDK's Responses.Cancel through
// Settle reaches the provider once per call and gets the provider's answer. A response
// cancelled while it generated stops there, and its operation settles as failed with the
// cost of what the provider billed (its usage so far); one cancelled while still queued
// settles as failed with the cost its provider reports (none). A cancel of a response that
// completed first, or of one created without background mode, gets the provider's refusal,
// and the completed one's operation settles as succeeded as a lookup closes it. Nothing is
// ever generated twice (ops rules 3, 9, 11 and 12).
func TestCancelBackgroundResponseThroughSettle(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	c := w.sdk("shop")
	noRetry := option.WithMaxRetries(0)
	gen := func(t *testing.T, id string) fake.Generation {
		t.Helper()
		for _, g := range w.fake.GenerationsOf(fake.APIResponses) {
			if g.ID == id {
				return g
			}
		}
		t.Fatalf("the provider billed no response %s", id)
		return fake.Generation{}
	}
	var apiErr *openai.Error
	for _, row := range []struct {
		name, key string
		run       func(t *testing.T, key string)
	}{
		{"in progress: it stops there, failed with the cost of its usage so far", "cancel-running", func(t *testing.T, key string) {
			created, err := c.Responses.New(ctx, backgrounded("draft the reply to ticket 40"), keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			// The generation is held once it has output, so the cancel meets it under way
			// however long the cancel takes to get there.
			w.waitOutput(t, created.ID)
			w.fake.SetPace(0, time.Hour)
			defer w.fake.SetPace(0, 25*time.Millisecond)
			whole := gen(t, created.ID).CompletionTokens
			var raw *http.Response
			got, err := c.Responses.Cancel(ctx, created.ID, option.WithResponseInto(&raw), noRetry)
			if err != nil {
				t.Fatalf("cancel through Settle: %v", err)
			}
			g := gen(t, created.ID)
			if got.ID != created.ID || got.Status != "cancelled" || got.Usage.OutputTokens <= 0 || got.Usage.OutputTokens != int64(g.CompletionTokens) ||
				g.CompletionTokens >= 24 || g.CompletionTokens >= whole || raw.Header.Get("Settle-Operation-Id") == "" {
				t.Fatalf("cancelled: %s %s usage %+v; the provider billed %d output tokens", got.ID, got.Status, got.Usage, g.CompletionTokens)
			}
			op := w.waitStatus(t, key, ops.StatusFailed)
			want, _ := llm.DefaultPrices().Cost(g.Model, llm.Usage{PromptTokens: g.PromptTokens, CompletionTokens: g.CompletionTokens,
				CachedTokens: g.CachedTokens, TotalTokens: g.PromptTokens + g.CompletionTokens})
			if op.CostMicros <= 0 || op.CostMicros != want || op.ProviderRef != created.ID {
				t.Fatalf("operation %s %s cost %d, want %d for what the provider billed", op.Status, op.ProviderRef, op.CostMicros, want)
			}
			// The generation stopped: nothing more is billed, and the response stays cancelled.
			time.Sleep(300 * time.Millisecond)
			if g2 := gen(t, created.ID); g2.CompletionTokens != g.CompletionTokens || w.providerState(t, created.ID).Status != "cancelled" {
				t.Fatalf("after the cancel the provider billed %d output tokens (%d at the cancel)", g2.CompletionTokens, g.CompletionTokens)
			}
			read, err := c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}, noRetry)
			if err != nil || read.Status != "cancelled" {
				t.Fatalf("read through Settle after the cancel: %v %+v", err, read)
			}
			// A second cancel is the provider's to answer: it is forwarded, once.
			again, err := c.Responses.Cancel(ctx, created.ID, noRetry)
			if err != nil || again.Status != "cancelled" {
				t.Fatalf("the second cancel: %v %+v", err, again)
			}
			if n := len(w.fake.Cancels()); n != 2 {
				t.Fatalf("the provider was asked to cancel %d times for two cancels", n)
			}
		}},
		{"queued: failed, with what the provider billed (nothing)", "cancel-queued", func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
			created, err := c.Responses.New(ctx, backgrounded("classify document 41"), keyed(key), noRetry)
			if err != nil || created.Status != "queued" {
				t.Fatalf("created: %v %+v", err, created)
			}
			got, err := c.Responses.Cancel(ctx, created.ID, noRetry)
			if err != nil || got.Status != "cancelled" || got.Usage.TotalTokens != 0 {
				t.Fatalf("cancel through Settle: %v %+v", err, got)
			}
			op := w.waitStatus(t, key, ops.StatusFailed)
			if g := gen(t, created.ID); op.CostMicros != 0 || g.PromptTokens != 0 || g.CompletionTokens != 0 {
				t.Fatalf("operation cost %d; the provider billed %+v", op.CostMicros, g)
			}
			// Past the hold, the cancelled response is not generated after all.
			time.Sleep(3200 * time.Millisecond)
			if s := w.providerState(t, created.ID).Status; s != "cancelled" {
				t.Fatalf("the queued response went on to %s after its cancel", s)
			}
		}},
		{"cancelled at the provider, then retried with the key: never created again", "cancel-behind", func(t *testing.T, key string) {
			p := backgrounded("draft the reply to ticket 44")
			created, err := c.Responses.New(ctx, p, keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			w.waitGenerating(t, created.ID)
			up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
			if got, err := up.Responses.Cancel(ctx, created.ID); err != nil || got.Status != "cancelled" {
				t.Fatalf("cancel at the provider: %v %+v", err, got)
			}
			// The request that followed the response gives it up, uncertain.
			for deadline := time.Now().Add(10 * time.Second); w.count(t, `SELECT count(*) FROM attempts a JOIN operations o ON o.id = a.operation_id
				WHERE o.intent_key = $1 AND a.error_code = 'response_cancelled' AND o.lease_until <= now()`, key) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the request following %s never gave it up", created.ID)
				}
			}
			_, err = c.Responses.New(ctx, p, keyed(key), noRetry)
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
				t.Fatalf("the retry of a cancelled response: %v", err)
			}
			w.waitStatus(t, key, ops.StatusUnknown)
			// The client's read of the cancelled response settles it, with its cost.
			if read, err := c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}, noRetry); err != nil || read.Status != "cancelled" {
				t.Fatalf("read: %v %+v", err, read)
			}
			if op := w.waitStatus(t, key, ops.StatusFailed); op.CostMicros <= 0 {
				t.Fatalf("operation cost %d", op.CostMicros)
			}
		}},
		{"completed first: the provider's refusal relayed, succeeded", "cancel-done", func(t *testing.T, key string) {
			created, err := c.Responses.New(ctx, backgrounded("where is order 4442?"), keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			done := pollDone(t, c, created.ID)
			before := len(w.fake.Cancels())
			_, err = c.Responses.Cancel(ctx, created.ID, noRetry)
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || len(w.fake.Cancels()) != before+1 {
				t.Fatalf("cancel of a completed response: %v", err)
			}
			op := w.waitStatus(t, key, ops.StatusSucceeded)
			if op.ProviderRef != created.ID || op.CostMicros <= 0 || w.providerState(t, created.ID).OutputText() != done.OutputText() {
				t.Fatalf("operation %s %s cost %d", op.Status, op.ProviderRef, op.CostMicros)
			}
		}},
		{"created in the foreground: the provider's refusal relayed", "cancel-foreground", func(t *testing.T, key string) {
			fg, err := c.Responses.New(ctx, respond("and order 4443?", "answer as support"), keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Responses.Cancel(ctx, fg.ID, noRetry)
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
				t.Fatalf("cancel of a foreground response: %v", err)
			}
			if op := w.waitStatus(t, key, ops.StatusSucceeded); op.Status != ops.StatusSucceeded {
				t.Fatalf("operation %s after a refused cancel", op.Status)
			}
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			before := len(w.fake.GenerationsOf(fake.APIResponses))
			row.run(t, row.key)
			if n := len(w.fake.GenerationsOf(fake.APIResponses)) - before; n != 1 {
				t.Fatalf("the provider generated %d responses, want 1", n)
			}
		})
	}
}

// TestCancelIsTenantScoped: POST /v1/responses/{id}/cancel through Settle reaches the
// provider only for the ids of the tenant's own calls: another tenant's response, or one
// created at the provider without Settle, is not found and nothing is forwarded, though the
// provider's account holds both and would cancel them.
func TestCancelIsTenantScoped(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	noRetry := option.WithMaxRetries(0)
	// The tenant's response stays queued long enough to be cancelled.
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	shop := w.sdk("shop")
	mine, err := shop.Responses.New(ctx, backgrounded("where is order 4450?"), keyed("scope-mine"), noRetry)
	if err != nil {
		t.Fatal(err)
	}
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	direct, err := up.Responses.New(ctx, backgrounded("not through Settle"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	for _, x := range []struct{ tenant, id string }{{"bank", mine.ID}, {"shop", direct.ID}, {"shop", "resp_none"}} {
		c := w.sdk(x.tenant)
		_, err := c.Responses.Cancel(ctx, x.id, noRetry)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Fatalf("%s cancelled %s: %v", x.tenant, x.id, err)
		}
	}
	if n := len(w.fake.Cancels()); n != 0 {
		t.Fatalf("the provider was asked to cancel %d responses of other owners", n)
	}
	// The tenant's own is cancelled, once.
	got, err := shop.Responses.Cancel(ctx, mine.ID, noRetry)
	if err != nil || got.ID != mine.ID || got.Status != "cancelled" {
		t.Fatalf("shop cancelled its own %s: %v %+v", mine.ID, err, got)
	}
	if c := w.fake.Cancels(); len(c) != 1 || c[0] != mine.ID {
		t.Fatalf("the provider was asked to cancel %v", c)
	}
	if s := w.providerState(t, direct.ID).Status; s == "cancelled" {
		t.Fatalf("the response created without Settle is %s", s)
	}
}

// TestACancelShowsOnItsOperationsPage: ops rule 8 records a cancel as its tenant's client
// request, and the operation's page lists it among what its client asked, with its
// reference and what it was answered: the cancel the provider carried out, and the second
// one it answered with the response cancelled already, each as cancelled. Neither is shown
// as a duplicate of the create.
func TestACancelShowsOnItsOperationsPage(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: 25 * time.Millisecond, dashboard: true})
	ctx := context.Background()
	noRetry := option.WithMaxRetries(0)
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	shop := w.sdk("shop")
	created, err := shop.Responses.New(ctx, backgrounded("draft the reply to ticket 62"), keyed("page-cancel"), noRetry)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := shop.Responses.Cancel(ctx, created.ID, noRetry, option.WithHeader("X-Request-Ref", "stop-ticket-62")); err != nil || got.Status != "cancelled" {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	op := w.waitStatus(t, "page-cancel", ops.StatusFailed)
	// The response was cancelled: cancelling it again is answered as it is, cancelled.
	if _, err := shop.Responses.Cancel(ctx, created.ID, noRetry, option.WithHeader("X-Request-Ref", "stop-again-62")); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	e := &dashEnv{env: &env{db: w.db, url: w.url}, clock: w.clock}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	status, body := e.page(t, c, "/ops/"+op.ID)
	if status != http.StatusOK {
		t.Fatalf("GET /ops/%s = %d\n%s", op.ID, status, body)
	}
	mustContain(t, body, "Cancel of the response (the provider cancelled it)", "ref stop-ticket-62", "ref stop-again-62", "answered cancelled")
	if strings.Contains(body, "Duplicate client request") {
		t.Fatalf("a cancel is shown as a duplicate of the create:\n%s", body)
	}
}
