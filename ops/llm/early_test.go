package llm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg"
)

// A call whose provider answered with a whole success is answered before its close is
// written: these tests hold the close by locking the operation's row from a connection of
// their own, as a slow writer would, and look at what the client has and what is recorded.

// heldWorld is a gateway world whose first attempt's close waits on a lock the test holds:
// release frees it. The lock is taken once the provider answered, before the gateway read
// the answer.
type heldWorld struct {
	*gatewayWorld
	locked chan func()
}

func newHeldWorld(t *testing.T) *heldWorld {
	t.Helper()
	h := &heldWorld{locked: make(chan func(), 1)}
	var once sync.Once
	h.gatewayWorld = newGatewayWorld(t, gatewaySetup{after: func(c llm.Call) {
		once.Do(func() { h.locked <- h.holdRow(t, c.OperationID) })
	}})
	return h
}

// holdRow locks operation id's row in a transaction of its own until the returned release
// is called (at the latest when the test ends).
func (w *gatewayWorld) holdRow(t *testing.T, id string) func() {
	ctx := context.Background()
	tx, err := w.db.Pool.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT 1 FROM operations WHERE id = $1 FOR UPDATE`, id)
	}
	if err != nil {
		t.Errorf("lock operation %s: %v", id, err)
		return func() {}
	}
	var once sync.Once
	release := func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

type callResult struct {
	r   *reply
	err error
}

// callHeld sends one chat completion of shop with key and returns what the client had once
// Complete returned, while the close is held, and release. A client that gets nothing
// within a few seconds fails the test: its answer waits for the close.
func (h *heldWorld) callHeld(t *testing.T, key, body string) (*reply, func(), error) {
	t.Helper()
	done := make(chan callResult, 1)
	go func() {
		r, err := h.complete(&reply{}, h.gw, "/v1/chat/completions", "shop", key, body, "")
		done <- callResult{r, err}
	}()
	release := h.held(t)
	select {
	case got := <-done:
		return got.r, release, got.err
	case <-time.After(3 * time.Second):
		release()
		<-done
		t.Fatal("the client had no answer while the close was held: its answer waited for the close")
	}
	return nil, nil, nil
}

// held waits until the provider was asked and the close is held, and returns its release.
func (h *heldWorld) held(t *testing.T) func() {
	t.Helper()
	select {
	case release := <-h.locked:
		return release
	case <-time.After(10 * time.Second):
		t.Fatal("the provider was not asked within 10 s")
	}
	return nil
}

// drain waits for the gateway's pending closes.
func (w *gatewayWorld) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.gw.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// wantOpen checks key's operation is still in progress with its attempt unfinished: an
// answer given early shows nothing as succeeded before the close (ops rule 9).
func (w *gatewayWorld) wantOpen(t *testing.T, key string) *ops.Operation {
	t.Helper()
	op := w.op(t, key)
	if op.Status != ops.StatusInProgress {
		t.Fatalf("before its close the operation is %s, want in_progress", op.Status)
	}
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND finished_at IS NULL`, op.ID); n != 1 {
		t.Fatalf("%d unfinished attempts before the close, want 1", n)
	}
	return op
}

// wantClosed checks key's operation was closed succeeded from the one generation, with one
// charge and the client request answered (ops rules 3, 8, 9).
func (w *gatewayWorld) wantClosed(t *testing.T, key string) *ops.Operation {
	t.Helper()
	gens := w.generations(t, 1)
	op := w.op(t, key)
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID {
		t.Fatalf("after its close the operation is %s %s, want succeeded with %s", op.Status, op.ProviderRef, gens[0].ID)
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d charges recorded, want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND answer = 'new' AND answered_at IS NOT NULL`, op.ID); n != 1 {
		t.Fatalf("%d client requests answered new, want 1", n)
	}
	return op
}

// The client of a plain call gets its whole answer, and the client of a stream its final
// event, while the close is still held; the close is written after, with one generation,
// one charge and the client request answered (ops rules 3, 8, 9). The early answer claims
// nothing Settle has not recorded: the provider's answer and the operation id (ops rule 12).
func TestLLMAnswerReachesTheClientBeforeItsClose(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHeldWorld(t)
			key := "early-" + name
			r, release, err := h.callHeld(t, key, chatBody("answer me at once", 0, stream))
			gen := h.generations(t, 1)[0]
			if stream {
				text, _, done := streamText(t, r)
				if err != nil || !done || text != gen.Content {
					t.Fatalf("the stream had %q (done %v, %v) while its close was held; provider generated %q", text, done, err, gen.Content)
				}
			} else if id, content := completion(t, r, err); id != gen.ID || content != gen.Content {
				t.Fatalf("the client had %s %q, provider generated %s %q", id, content, gen.ID, gen.Content)
			}
			op := h.wantOpen(t, key)
			if r.head.OperationID != op.ID || r.head.Replayed || r.head.Close {
				t.Fatalf("early answer's head %+v", r.head)
			}
			release()
			h.waitStatus(t, key, ops.StatusSucceeded)
			h.wantClosed(t, key)
		})
	}
}

// gatedStore is the database with a gate before the close of a succeeded attempt: a
// close waits at the gate until the test opens it, without holding any row meanwhile (a
// row lock held by the test would hold the retry's admission too, where a close in
// progress holds it for a moment).
type gatedStore struct {
	*pg.DB
	held chan struct{}
	gate chan struct{}
}

func (s *gatedStore) Transition(ctx context.Context, p ops.TransitionParams) (*ops.Operation, error) {
	if p.Finish != nil && p.To == ops.StatusSucceeded {
		s.held <- struct{}{}
		<-s.gate
	}
	return s.DB.Transition(ctx, p)
}

// A retry with the same key between the early answer and the close is told the key is in
// flight, or with Prefer: wait gets the same answer replayed once the close is written;
// the provider is never asked twice (ops rules 2, 3).
func TestLLMRetryBetweenTheEarlyAnswerAndTheCloseSendsNothing(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	store := &gatedStore{DB: w.db, held: make(chan struct{}, 1), gate: make(chan struct{})}
	ledger := testworld.RegisterKinds(ops.NewLedger(store, w.clock))
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: w.up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
	if err != nil {
		t.Fatal(err)
	}
	w.gw = gw
	body := chatBody("one generation only", 0, false)
	first := make(chan callResult, 1)
	go func() {
		r, err := w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", "early-retry", body, "")
		first <- callResult{r, err}
	}()
	<-store.held
	var got callResult
	select {
	case got = <-first:
	case <-time.After(3 * time.Second):
		close(store.gate)
		t.Fatal("the client had no answer while the close was held: its answer waited for the close")
	}
	id, _ := completion(t, got.r, got.err)
	r, err := w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", "early-retry", body, "")
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonKeyInUse)
	waited := make(chan callResult, 1)
	go func() {
		r, err := w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", "early-retry", body, "wait=10")
		waited <- callResult{r, err}
	}()
	time.Sleep(200 * time.Millisecond) // the waiter waits on the held close
	w.wantOpen(t, "early-retry")
	close(store.gate)
	got = <-waited
	if wid, _ := completion(t, got.r, got.err); wid != id || !got.r.head.Replayed {
		t.Fatalf("the waiting retry had %s (replayed %v), the first client %s", wid, got.r.head.Replayed, id)
	}
	w.wantClosed(t, "early-retry")
}

// Shutdown waits for a close still pending after its answer: Drain returns only once it is
// written, and with a deadline that passes first it says so (ops rule 8: the client
// request is recorded with its answer before the process ends).
func TestLLMDrainWaitsForAPendingClose(t *testing.T) {
	t.Parallel()
	h := newHeldWorld(t)
	r, release, err := h.callHeld(t, "early-drain", chatBody("drain me", 0, false))
	completion(t, r, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := h.gw.Drain(ctx); err == nil {
		t.Fatal("Drain returned while a close was pending")
	}
	h.wantOpen(t, "early-drain")
	release()
	h.drain(t)
	h.wantClosed(t, "early-drain") // at once: no polling
}

// The database stops after the provider answered: the client has its answer, the close
// cannot be written, and the operation stays open with its attempt sent, never shown
// succeeded (ops rule 9). Once its lease runs out, the client's retry looks the call up at
// the provider and closes it from the stored completion, sending nothing again (ops rules
// 3, 11).
func TestLLMCloseLostAfterAnEarlyAnswerIsSettledByItsLookup(t *testing.T) {
	t.Parallel()
	var w *gatewayWorld
	var once sync.Once
	w = newGatewayWorld(t, gatewaySetup{behindRelay: true, stored: true, after: func(llm.Call) { once.Do(w.relay.Off) }})
	body := chatBody("a close that is lost", 0, false)
	r, err := w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", "early-lost", body, "")
	id, content := completion(t, r, err)
	w.drain(t) // the close failed
	w.relay.On()
	gen := w.generations(t, 1)[0]
	if id != gen.ID || content != gen.Content {
		t.Fatalf("the client had %s %q, provider generated %s", id, content, gen.ID)
	}
	w.wantOpen(t, "early-lost")
	w.clock.Advance(w.ledger.Limits.Lease + time.Second)
	again, err := w.call("shop", "early-lost", body)
	if rid, _ := completion(t, again, err); rid != gen.ID || !again.head.Replayed {
		t.Fatalf("the retry answered %s (replayed %v), want %s replayed", rid, again.head.Replayed, gen.ID)
	}
	op := w.op(t, "early-lost")
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gen.ID {
		t.Fatalf("operation %s %s, want succeeded with %s", op.Status, op.ProviderRef, gen.ID)
	}
	w.generations(t, 1)
}
