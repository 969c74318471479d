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
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// backgrounded is a question asked in background mode (background: true).
func backgrounded(q string) responses.ResponseNewParams {
	p := respond(q, "answer as support")
	p.Background = openai.Bool(true)
	return p
}

// bgStream is what a client read of a Responses API stream: the types and sequence numbers
// of its events, the text of its deltas, its last response and the error that ended it.
type bgStream struct {
	types []string
	seqs  []int64
	text  string
	final responses.Response
	err   error
}

func readBG(s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) bgStream {
	var out bgStream
	for s.Next() {
		ev := s.Current()
		out.types = append(out.types, ev.Type)
		out.seqs = append(out.seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			out.text += ev.Delta
		case "response.created", "response.completed":
			out.final = ev.Response
		}
	}
	out.err = s.Err()
	return out
}

// consecutive fails unless seqs count up by one from 0: no event lost, none repeated.
func consecutive(t *testing.T, seqs []int64) {
	t.Helper()
	for i, n := range seqs {
		if n != int64(i) {
			t.Fatalf("sequence numbers %v; want 0, 1, 2, … with none lost or repeated", seqs)
		}
	}
}

// pollDone reads a response through Settle's GET /v1/responses/{id} until it ends.
func pollDone(t *testing.T, c openai.Client, id string) *responses.Response {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := c.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("GET /v1/responses/%s through Settle: %v", id, err)
		}
		if r.Status == "completed" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("response %s is still %s", id, r.Status)
		}
	}
}

// waitProvider waits until the provider's own store holds response id completed.
func (w *llmWorld) waitProvider(t *testing.T, id string) {
	t.Helper()
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := up.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err == nil && got.Status == "completed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider's response %s: %v", id, err)
		}
	}
}

// TestBackgroundResponsesSettleExactlyOnce: POST /v1/responses with background: true through
// the official SDK costs one upstream generation per Idempotency-Key in every row. The client
// gets what OpenAI gives (the queued response, or the stream of its events); the response id
// is recorded at once; GET /v1/responses/{id} and a retry with the key are answered from the
// provider's stored response, never by a second POST; a stream the provider cut is resumed
// from the provider after the last event relayed, token-exact; and the operation settles, with
// its cost, when the response ends (ops rules 3, 5 and 9).
func TestBackgroundResponsesSettleExactlyOnce(t *testing.T) {
	t.Parallel()
	// The gate holds the gateway's follow of a response only where a row says so.
	w, gate := newFollowGatedWorld(t, llmSetup{chunkDelay: 2 * time.Millisecond, attemptTimeout: 400 * time.Millisecond})
	gate.let()
	ctx := context.Background()
	c := w.sdk("shop")
	noRetry := option.WithMaxRetries(0)
	last := func() fake.Generation {
		gens := w.fake.GenerationsOf(fake.APIResponses)
		return gens[len(gens)-1]
	}
	settled := func(t *testing.T, key, id string) {
		t.Helper()
		op := w.waitStatus(t, key, ops.StatusSucceeded)
		if op.ProviderRef != id || op.CostMicros <= 0 || len(op.Result) == 0 {
			t.Fatalf("operation %s settled with %s, cost %d; want %s", op.ID, op.ProviderRef, op.CostMicros, id)
		}
	}
	for _, row := range []struct {
		name, key string
		run       func(t *testing.T, key string)
	}{
		{"plain: the queued response, then GET through Settle until it completed", "bg-plain", func(t *testing.T, key string) {
			var raw *http.Response
			r, err := c.Responses.New(ctx, backgrounded("where is order 4417?"), keyed(key), option.WithResponseInto(&raw), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			g := last()
			if r.ID != g.ID || !r.Background || (r.Status != "queued" && r.Status != "in_progress") || raw.Header.Get("Settle-Operation-Id") == "" {
				t.Fatalf("created %s %s background=%v; provider %s", r.ID, r.Status, r.Background, g.ID)
			}
			refs, err := w.db.AttemptRefs(ctx, w.op(t, key).ID)
			if err != nil || refs[1] != g.ID {
				t.Fatalf("attempt ids %v, %v: the response id is not recorded at once", refs, err)
			}
			done := pollDone(t, c, r.ID)
			if done.OutputText() != g.Content {
				t.Fatalf("completed with %q; provider generated %q", done.OutputText(), g.Content)
			}
			settled(t, key, g.ID)
		}},
		{"stream: the provider's events, then the stored response", "bg-stream", func(t *testing.T, key string) {
			s := readBG(c.Responses.NewStreaming(ctx, backgrounded("and order 4418?"), keyed(key), noRetry))
			g := last()
			if s.err != nil || s.text != g.Content || s.final.ID != g.ID || s.types[0] != "response.created" || s.types[len(s.types)-1] != "response.completed" {
				t.Fatalf("streamed %v %q (%v); provider %+v", s.types, s.text, s.err, g)
			}
			consecutive(t, s.seqs)
			settled(t, key, g.ID)
			again, err := c.Responses.New(ctx, backgrounded("and order 4418?"), keyed(key), noRetry)
			if err != nil || again.ID != g.ID || again.OutputText() != g.Content {
				t.Fatalf("the retry: %v %s %q", err, again.ID, again.OutputText())
			}
		}},
		{"same key twice: the same response, never a second POST", "bg-twice", func(t *testing.T, key string) {
			first, err := c.Responses.New(ctx, backgrounded("refund order 4419"), keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			var raw *http.Response
			again, err := c.Responses.New(ctx, backgrounded("refund order 4419"), keyed(key), option.WithResponseInto(&raw), noRetry)
			if err != nil {
				t.Fatalf("the second: %v", err)
			}
			if again.ID != first.ID || raw.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the second: %s (first %s), replayed %q", again.ID, first.ID, raw.Header.Get("Idempotent-Replayed"))
			}
			done := pollDone(t, c, first.ID)
			settled(t, key, first.ID)
			third, err := c.Responses.New(ctx, backgrounded("refund order 4419"), keyed(key), noRetry)
			if err != nil || third.ID != first.ID || third.Status != "completed" || third.OutputText() != done.OutputText() {
				t.Fatalf("after it completed: %v %s %s", err, third.ID, third.Status)
			}
		}},
		{"stream cut then retried: resumed from the provider, token-exact", "bg-cut", func(t *testing.T, key string) {
			// The provider cuts the stream after 6 events, and the resumed stream after 5 more.
			w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultDropStream, Chunk: 6, Times: 1})
			w.fake.AddFault(fake.LLMFault{Path: "/v1/responses/{id}", Kind: fake.LLMFaultDropStream, Chunk: 5, Times: 1})
			s := readBG(c.Responses.NewStreaming(ctx, backgrounded("draft the reply to ticket 12"), keyed(key), noRetry))
			g := last()
			if s.err != nil || s.text != g.Content || s.final.ID != g.ID || s.types[len(s.types)-1] != "response.completed" {
				t.Fatalf("the cut stream reached the client as %v %q (%v); provider %+v", s.types, s.text, s.err, g)
			}
			consecutive(t, s.seqs)
			settled(t, key, g.ID)
			r := readBG(c.Responses.NewStreaming(ctx, backgrounded("draft the reply to ticket 12"), keyed(key), noRetry))
			if r.err != nil || r.text != g.Content || r.final.ID != g.ID {
				t.Fatalf("the retry: %v %q (%v)", r.types, r.text, r.err)
			}
		}},
		{"billed, then timed out, then retried: the retry follows the same response", "bg-timeout", func(t *testing.T, key string) {
			// The follow after the timed-out stream sees nothing until the client has the
			// error event: a follow that outlasts the provider's hold on a busy machine
			// would relay the whole response instead, which is another row (bg-cut).
			gate.shut()
			defer gate.let()
			w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 2 * time.Second, Times: 1})
			p := backgrounded("classify document 8")
			s := readBG(c.Responses.NewStreaming(ctx, p, keyed(key), noRetry))
			gate.let()
			g := last()
			// The stream ends with Settle's error event, which the SDK passes on as an event.
			if s.err != nil || s.text != "" || s.types[0] != "response.created" || s.types[len(s.types)-1] != "error" || s.final.ID != g.ID {
				t.Fatalf("the stream the provider held: %v %q (%v); provider %s", s.types, s.text, s.err, g.ID)
			}
			w.waitProvider(t, g.ID)
			r := readBG(c.Responses.NewStreaming(ctx, p, keyed(key), noRetry))
			if r.err != nil || r.text != g.Content || r.final.ID != g.ID {
				t.Fatalf("the retry: %v %q (%v)", r.types, r.text, r.err)
			}
			consecutive(t, r.seqs)
			settled(t, key, g.ID)
		}},
		{"billed, then timed out, plain: the retry and GET answer from the provider", "bg-timeout-plain", func(t *testing.T, key string) {
			w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 2 * time.Second, Times: 1})
			p := backgrounded("classify document 9")
			first, err := c.Responses.New(ctx, p, keyed(key), noRetry)
			if err != nil || first.Status != "queued" {
				t.Fatalf("created %v %+v", err, first)
			}
			again, err := c.Responses.New(ctx, p, keyed(key), noRetry)
			if err != nil || again.ID != first.ID {
				t.Fatalf("the retry: %v %s (first %s)", err, again.ID, first.ID)
			}
			done := pollDone(t, c, first.ID)
			if done.OutputText() != last().Content {
				t.Fatalf("completed with %q", done.OutputText())
			}
			settled(t, key, first.ID)
		}},
		{"another body with the key: 422", "bg-other", func(t *testing.T, key string) {
			first, err := c.Responses.New(ctx, backgrounded("where is order 4420?"), keyed(key), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			var apiErr *openai.Error
			other := backgrounded("where is order 4420?")
			other.Instructions = openai.String("answer as a pirate")
			if _, err := c.Responses.New(ctx, other, keyed(key), noRetry); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("other instructions: %v", err)
			}
			// Background is part of the request: the same question in the foreground is another.
			if _, err := c.Responses.New(ctx, respond("where is order 4420?", "answer as support"), keyed(key), noRetry); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("in the foreground: %v", err)
			}
			pollDone(t, c, first.ID)
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

// TestBackgroundRetrieveIsTenantScoped: GET /v1/responses/{id} through Settle answers only the
// ids of the tenant's own operations: another tenant's response, or one created at the
// provider without Settle, is not found, though the provider's account holds both.
func TestBackgroundRetrieveIsTenantScoped(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{chunkDelay: time.Millisecond})
	ctx := context.Background()
	shop := w.sdk("shop")
	mine, err := shop.Responses.New(ctx, backgrounded("where is order 4417?"), keyed("bg-mine"), option.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	pollDone(t, w.sdk("shop"), mine.ID)
	up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	direct, err := up.Responses.New(ctx, backgrounded("not through Settle"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	for _, x := range []struct{ tenant, id string }{{"bank", mine.ID}, {"shop", direct.ID}} {
		c := w.sdk(x.tenant)
		_, err := c.Responses.Get(ctx, x.id, responses.ResponseGetParams{}, option.WithMaxRetries(0))
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Fatalf("%s read %s: %v", x.tenant, x.id, err)
		}
		s := readBG(c.Responses.GetStreaming(ctx, x.id, responses.ResponseGetParams{}, option.WithMaxRetries(0)))
		if !errors.As(s.err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || len(s.types) != 0 {
			t.Fatalf("%s streamed %s: %v %v", x.tenant, x.id, s.types, s.err)
		}
	}
	// The tenant's own response created in the foreground is read, but not streamed again:
	// the provider's refusal is relayed as it gave it, at once.
	fg, err := shop.Responses.New(ctx, respond("and order 4418?", "answer as support"), keyed("fg-mine"), option.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := shop.Responses.Get(ctx, fg.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != fg.OutputText() {
		t.Fatalf("read %s: %v", fg.ID, err)
	}
	start := time.Now()
	s := readBG(shop.Responses.GetStreaming(ctx, fg.ID, responses.ResponseGetParams{}, option.WithMaxRetries(0)))
	if !errors.As(s.err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || time.Since(start) > 2*time.Second {
		t.Fatalf("streamed a foreground response: %v after %s", s.err, time.Since(start))
	}
}

// TestBackgroundResponseSettlesOnTheClientsRetrieve: a batch background call whose response
// the provider held past every wait is unknown (nothing is sent again); the client's own GET
// of its response once it completed settles the operation as succeeded with the provider's
// response and its cost, and the key then replays it (ops rules 5, 9 and 11).
func TestBackgroundResponseSettlesOnTheClientsRetrieve(t *testing.T) {
	t.Parallel()
	// The gateway's follow of the response sees nothing until the operation is unknown: a
	// provider hold of a set time may end before a busy machine's follow gives up.
	w, gate := newFollowGatedWorld(t, llmSetup{chunkDelay: time.Millisecond, attemptTimeout: 300 * time.Millisecond,
		modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	c := w.sdk("pipeline")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 2 * time.Second, Times: 1})
	p := backgrounded("summarise document 7")
	first, err := c.Responses.New(ctx, p, keyed("bg-batch"), option.WithMaxRetries(0))
	if err != nil || first.Status != "queued" {
		t.Fatalf("created: %v %+v", err, first)
	}
	op := w.waitStatus(t, "bg-batch", ops.StatusUnknown)
	gate.let()
	w.waitProvider(t, first.ID)
	done := pollDone(t, c, first.ID)
	op = w.waitStatus(t, "bg-batch", ops.StatusSucceeded)
	if op.ProviderRef != first.ID || op.CostMicros <= 0 || w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup'`, op.ID) != 1 {
		t.Fatalf("operation %s %s cost %d", op.Status, op.ProviderRef, op.CostMicros)
	}
	var raw *http.Response
	again, err := c.Responses.New(ctx, p, keyed("bg-batch"), option.WithResponseInto(&raw), option.WithMaxRetries(0))
	if err != nil || again.ID != first.ID || again.OutputText() != done.OutputText() || raw.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the replay: %v %s", err, again.ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 1 || !strings.HasPrefix(first.ID, "resp_") {
		t.Fatalf("the provider generated %d responses, want 1", n)
	}
}

// TestBackgroundResponseIsAnAnswerOnlyOnceEnded: a batch background call whose response the
// provider holds queued past every wait is unknown, and neither the desk's lookup nor the
// reconciler takes the queued response for an answer; once it completed, the reconciler's
// lookup by the recorded id settles the operation with it and its cost, and the key replays
// it, all from one generation (ops rules 9, 11 and 12).
func TestBackgroundResponseIsAnAnswerOnlyOnceEnded(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{reconciled: true})
	ctx := context.Background()
	c := w.sdk("pipeline")
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 4 * time.Second, Times: 1})
	p := backgrounded("summarise document 12")
	first, err := c.Responses.New(ctx, p, keyed("bg-looked"), option.WithMaxRetries(0))
	if err != nil || first.Status != "queued" {
		t.Fatalf("created: %v %+v", err, first)
	}
	op := w.waitStatus(t, "bg-looked", ops.StatusUnknown)
	out, err := w.desk.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || out.Outcome == desk.LookupClosed {
		t.Fatalf("the desk's lookup of a queued response: %+v, %v", out, err)
	}
	r := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	if reps, err := r.RunOnce(ctx); err != nil || len(reps) != 1 || reps[0].Closed != 0 {
		t.Fatalf("the reconciler over a queued response: %+v, %v", reps, err)
	}
	if got := w.op(t, "bg-looked"); got.Status != ops.StatusUnknown {
		t.Fatalf("operation %s while its response is queued", got.Status)
	}
	w.waitProvider(t, first.ID)
	w.clock.Advance(time.Minute)
	if reps, err := r.RunOnce(ctx); err != nil || len(reps) != 1 || reps[0].Closed != 1 {
		t.Fatalf("the reconciler once the response completed: %+v, %v", reps, err)
	}
	got := w.op(t, "bg-looked")
	if got.Status != ops.StatusSucceeded || got.ProviderRef != first.ID || got.CostMicros <= 0 {
		t.Fatalf("operation %s %s cost %d", got.Status, got.ProviderRef, got.CostMicros)
	}
	again, err := c.Responses.New(ctx, p, keyed("bg-looked"), option.WithMaxRetries(0))
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if err != nil || again.ID != first.ID || again.Status != "completed" || len(gens) != 1 || again.OutputText() != gens[0].Content {
		t.Fatalf("the replay: %v %s %s; the provider generated %d", err, again.ID, again.Status, len(gens))
	}
}
