package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// gatewayWorld is the gateway on the parts it runs on in production: a database of its own
// on the test Postgres, the fake LLM provider serving HTTP on loopback, and the OpenAI
// adapter calling it. Tests call Gateway.Complete themselves, as web's handler does, so
// what they assert is the gateway's and not the HTTP layer's, which web's tests cover.
type gatewayWorld struct {
	world *testworld.World
	db    *pg.DB
	clock *ops.ManualClock
	fake  *fake.LLM
	base  string
	gw    *llm.Gateway
	// up and ledger are the gateway's adapter and ledger; lookups looks calls up in the
	// provider's stored completions, as the desk and the reconciler do.
	up      *openai.Client
	ledger  *ops.Ledger
	lookups *llm.Lookups
	// tenants are shop and bank, interactive unless set otherwise, pipeline, batch when set
	// so, which require an Idempotency-Key, and open, which does not.
	tenants map[string]*ops.Tenant
	// relay is the database's relay when the world was set up behindRelay.
	relay *pgtest.Relay
}

// gatewaySetup shapes a gatewayWorld.
type gatewaySetup struct {
	attemptTimeout time.Duration
	latency        time.Duration
	chunkDelay     time.Duration
	modes          map[string]llm.Mode
	keyScopes      map[string]llm.KeyScope
	// lease, when set, runs the ledger on the wall clock with this lease.
	lease time.Duration
	// stored makes the gateway look calls up in the provider's stored completions before it
	// sends again, and runs the fake provider on the test's clock, so that a completion the
	// provider shows late appears when the test advances it.
	stored bool
	// reconciled tells the gateway a reconciler looks unknown calls up.
	reconciled bool
	// after, when set, runs once the provider answered an attempt and before the gateway
	// reads the answer: a test's hook between the provider's answer and its record.
	after func(c llm.Call)
	// behindRelay puts the database behind a relay the test switches off and on
	// (gatewayWorld.relay): a Postgres that stops and comes back.
	behindRelay bool
	// store, when set, wraps the store the gateway's ledger writes through: a test's hook
	// inside the ledger's own steps.
	store func(ops.Store) ops.Store
	// held, when set, stands between the gateway and the provider's adapter, holding the
	// sends a test arms it for.
	held *heldSends
}

func newGatewayWorld(t *testing.T, o gatewaySetup) *gatewayWorld {
	t.Helper()
	var relay *pgtest.Relay
	var tw *testworld.World
	if o.behindRelay {
		var url string
		relay, url = pgtest.NewBehindRelay(t)
		tw = testworld.On(t, url)
	} else {
		tw = testworld.New(t)
	}
	w := &gatewayWorld{world: tw, db: tw.DB, clock: ops.NewManualClock(time.Now()), tenants: map[string]*ops.Tenant{}, relay: relay}
	fo := fake.LLMOptions{Seed: 1, Latency: o.latency, ChunkDelay: o.chunkDelay}
	if o.stored {
		fo.Clock = w.clock.Now
	}
	w.fake, w.base = tw.LLM(fo)
	w.gw, w.up, w.ledger = w.gateway(t, o)
	w.lookups = &llm.Lookups{Ledger: w.ledger, Events: w.db, Store: w.up, Prices: llm.DefaultPrices()}
	for _, name := range []string{"shop", "bank", "pipeline", "open"} {
		w.tenants[name] = tw.Tenant(name)
	}
	if _, err := w.db.Pool.Exec(context.Background(), `UPDATE tenants SET require_idempotency_key = false WHERE name = 'open'`); err != nil {
		t.Fatal(err)
	}
	w.tenants["open"] = tw.Tenant("open")
	return w
}

// gateway starts another gateway process on the world's database and provider, as a second
// replica would.
func (w *gatewayWorld) gateway(t *testing.T, o gatewaySetup) (*llm.Gateway, *openai.Client, *ops.Ledger) {
	t.Helper()
	if o.stored && o.attemptTimeout == 0 {
		o.attemptTimeout = 300 * time.Millisecond
	}
	up := w.world.Upstream(w.base, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", AttemptTimeout: o.attemptTimeout}).(*openai.Client)
	ledger := w.world.GatewayLedger(w.clock, o.lease)
	if o.store != nil {
		wrapped := testworld.RegisterKinds(ops.NewLedger(o.store(w.db), ledger.Clock))
		wrapped.Limits = ledger.Limits
		ledger = wrapped
	}
	var sender llm.Upstream = up
	if o.after != nil {
		sender = hookedUpstream{up, o.after}
	}
	if o.held != nil {
		o.held.Upstream, sender = sender, o.held
	}
	cfg := llm.Config{Ledger: ledger, Upstream: sender, Prices: llm.DefaultPrices(),
		TenantModes: o.modes, TenantKeyScopes: o.keyScopes, Refs: w.db, Streams: w.db, Reconciled: o.reconciled}
	if o.stored {
		cfg.Stored = up
	}
	gw, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gw, up, ledger
}

// hookedUpstream is the provider's adapter with a hook between its answer and the gateway.
type hookedUpstream struct {
	llm.Upstream
	after func(c llm.Call)
}

func (h hookedUpstream) Send(ctx context.Context, c llm.Call) llm.Reply {
	r := h.Upstream.Send(ctx, c)
	h.after(c)
	return r
}

// reply is what the gateway wrote to its Sink.
type reply struct {
	began bool
	head  llm.Head
	body  bytes.Buffer
	// written, when set, is called with each part of the body as the gateway writes it,
	// while the call still runs: what a client reading the stream sees at that moment.
	written func(p []byte)
}

func (r *reply) Begin(h llm.Head) error {
	r.began, r.head = true, h
	return nil
}

func (r *reply) Write(p []byte) error {
	if r.written != nil {
		r.written(p)
	}
	r.body.Write(p)
	return nil
}

// callOn sends one request of tenant to a route of gw; key "" sends no Idempotency-Key,
// and prefer is the Prefer header's value.
func (w *gatewayWorld) callOn(gw *llm.Gateway, route, tenant, key, body, prefer string) (*reply, error) {
	return w.callInto(&reply{}, gw, route, tenant, key, body, prefer)
}

// callInto is callOn writing into out. Complete returns once the client has its answer,
// which for a whole success is before the call's close is written (early.go); these tests
// read what the call recorded, so it waits for gw's closes too (complete does not).
func (w *gatewayWorld) callInto(out *reply, gw *llm.Gateway, route, tenant, key, body, prefer string) (*reply, error) {
	r, err := w.complete(out, gw, route, tenant, key, body, prefer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if derr := gw.Drain(ctx); derr != nil {
		err = errors.Join(err, derr)
	}
	return r, err
}

// complete sends one request as callOn does and returns as soon as Complete returns.
func (w *gatewayWorld) complete(out *reply, gw *llm.Gateway, route, tenant, key, body, prefer string) (*reply, error) {
	err := gw.Complete(context.Background(), llm.Request{Tenant: w.tenants[tenant], Route: route,
		Key: key, HasKey: key != "", ContentType: "application/json", Body: strings.NewReader(body), Prefer: prefer}, out)
	return out, err
}

// call sends one chat completion request of tenant to the world's gateway.
func (w *gatewayWorld) call(tenant, key, body string) (*reply, error) {
	return w.callOn(w.gw, "/v1/chat/completions", tenant, key, body, "")
}

// chatBody is a chat completion request of one user message; user, when set, is the
// request's end user.
func chatBody(q string, temperature float64, stream bool, user ...string) string {
	req := map[string]any{"model": "fake-small", "temperature": temperature, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": q}}}
	if len(user) > 0 {
		req["user"] = user[0]
	}
	b, _ := json.Marshal(req)
	return string(b)
}

// completion is the chat completion a call answered with, failing the test on an error or
// an answer that is not one.
func completion(t *testing.T, r *reply, err error) (id, content string) {
	t.Helper()
	if err != nil {
		t.Fatalf("the call: %v", err)
	}
	var c struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if !r.began || r.head.Stream || json.Unmarshal(r.body.Bytes(), &c) != nil || len(c.Choices) == 0 {
		t.Fatalf("the call answered %+v %s; want a chat completion", r.head, r.body.Bytes())
	}
	return c.ID, c.Choices[0].Message.Content
}

// streamText reads a streamed chat completion and returns the text of its first choice,
// the number of chunks and whether [DONE] ended it.
func streamText(t *testing.T, r *reply) (string, int, bool) {
	t.Helper()
	var text strings.Builder
	n := 0
	for _, line := range strings.Split(r.body.String(), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			return text.String(), n, true
		}
		n++
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	return text.String(), n, false
}

// wantRefused checks the gateway refused a call, before answering anything, with that code
// and reason (which web turns into the HTTP status and the problem's code), and returns the
// sentence the client is told.
func wantRefused(t *testing.T, r *reply, err error, code, reason string) string {
	t.Helper()
	if err == nil || r.began || ops.ErrorCode(err) != code || ops.ErrorReason(err) != reason {
		t.Fatalf("got %v (code %s, reason %s, answer began %v); want a refusal %s %s", err, ops.ErrorCode(err), ops.ErrorReason(err), r.began, code, reason)
	}
	return ops.ErrorMessage(err)
}

func (w *gatewayWorld) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return w.world.Count(t, q, args...)
}

func (w *gatewayWorld) generations(t *testing.T, want int) []fake.Generation {
	t.Helper()
	return testworld.Generations(t, w.fake, want)
}

// op is the latest operation of key.
func (w *gatewayWorld) op(t *testing.T, key string) *ops.Operation {
	t.Helper()
	return w.world.Operation(t, key)
}

// waitStatus polls until the key's operation reaches status (the generation runs on after
// a client leaves).
func (w *gatewayWorld) waitStatus(t *testing.T, key string, status ops.Status) *ops.Operation {
	t.Helper()
	return w.world.WaitStatus(t, key, status, 10*time.Second)
}

// waitAdmitted polls until a request with key has opened its operation.
func (w *gatewayWorld) waitAdmitted(t *testing.T, key string) {
	t.Helper()
	w.world.WaitAdmitted(t, key)
}

// billedThenTimedOut sends one call of the batch tenant pipeline whose generation the
// provider bills and stores and whose answer times out: the operation is unknown, the
// completion exists.
func (w *gatewayWorld) billedThenTimedOut(t *testing.T, key, question string) (*ops.Operation, fake.Generation) {
	t.Helper()
	before := len(w.fake.Generations())
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	r, err := w.call("pipeline", key, chatBody(question, 0, false))
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	op := w.op(t, key)
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s, want unknown", op.Status)
	}
	gens := w.generations(t, before+1)
	return op, gens[before]
}
