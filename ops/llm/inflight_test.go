package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Two gateway processes on one database: a request waiting on the other process's key
// watches the ledger and gets the stored result.
func TestLLMWaitAcrossProcesses(t *testing.T) {
	t.Parallel()
	held := &heldSends{}
	w := newGatewayWorld(t, gatewaySetup{latency: 400 * time.Millisecond, held: held})
	// The second process's gateway on the same database.
	other, _, _ := w.gateway(t, gatewaySetup{})
	first := make(chan error, 1)
	go func() {
		_, err := w.call("shop", "x-proc", chatBody("hello", 0.2, false))
		first <- err
	}()
	w.waitAdmitted(t, "x-proc")
	r, err := w.callOn(other, "/v1/chat/completions", "shop", "x-proc", chatBody("hello", 0.2, true), "wait=5")
	text, _, done := streamText(t, r)
	gens := w.generations(t, 1)
	if err != nil || !done || text != gens[0].Content || !r.head.Replayed || <-first != nil {
		t.Fatalf("the other process answered %v %q (done %v, replayed %v); provider generated %q", err, text, done, r.head.Replayed, gens[0].Content)
	}
	// Without Prefer, the other process is refused with Retry-After while the key is in
	// flight: held at the provider's answer, whatever the machine's speed.
	hold := held.holdNext(t, 0)
	go func() {
		_, err := w.call("shop", "x-proc-2", chatBody("hello", 0.3, false))
		first <- err
	}()
	hold.wait(t)
	r, err = w.callOn(other, "/v1/chat/completions", "shop", "x-proc-2", chatBody("hello", 0.3, false), "")
	hold.let()
	if p, ok := llm.ProblemOf(err); !ok || p.RetryAfter != time.Second {
		t.Fatalf("Retry-After %+v (%v)", p, ok)
	}
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonKeyInUse)
	<-first
	w.generations(t, 2)
}

// A generation longer than the lease keeps its lease alive, so a retry meanwhile is told
// the key is in flight instead of taking the operation over and generating again.
func TestLLMLongGenerationKeepsItsLease(t *testing.T) {
	t.Parallel()
	held := &heldSends{}
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 40 * time.Millisecond, lease: 300 * time.Millisecond, held: held})
	// The stream stops after its role and first two tokens reached the client, and goes on
	// only once the retry below has its answer: mid-stream however slow the machine.
	hold := held.holdNext(t, 3)
	first := make(chan *reply, 1)
	go func() {
		r, _ := w.call("shop", "long-1", chatBody("a long answer", 0.2, true))
		first <- r
	}()
	hold.wait(t)
	// Mid-stream the operation shows phase first_token and a lease renewed past its first
	// end: more than two leases into the stream, it is still this request's.
	live := w.op(t, "long-1")
	for deadline := time.Now().Add(10 * time.Second); live.Phase != ops.PhaseFirstToken || live.LeaseUntil == nil ||
		!live.LeaseUntil.After(live.CreatedAt.Add(3*300*time.Millisecond)); live = w.op(t, "long-1") {
		if live.Status != ops.StatusInProgress || time.Now().After(deadline) {
			t.Fatalf("mid-stream: %s, phase %q, lease until %v (opened %v)", live.Status, live.Phase, live.LeaseUntil, live.CreatedAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A retry that asks for JSON is refused while the key is in flight (a streaming one
	// would follow the stream live). It does not wait for the gateway's runs, the held one
	// among them.
	r, err := w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", "long-1", chatBody("a long answer", 0.2, false), "")
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonKeyInUse)
	hold.let()
	if text, _, _ := streamText(t, <-first); text != w.generations(t, 1)[0].Content {
		t.Fatalf("first stream %q", text)
	}
	w.waitStatus(t, "long-1", ops.StatusSucceeded)
}

// Two identical requests at once that both wait with Prefer get the one generation: the
// second waits for the first's answer instead of being refused, or, streaming, follows the
// first's stream from its start.
func TestLLMWaitersGetTheOneGeneration(t *testing.T) {
	t.Parallel()
	t.Run("both wait with Prefer", func(t *testing.T) {
		t.Parallel()
		w := newGatewayWorld(t, gatewaySetup{latency: 400 * time.Millisecond})
		var wg sync.WaitGroup
		bodies := make([]string, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := w.callOn(w.gw, "/v1/chat/completions", "shop", "msg-2", chatBody("write the summary", 0.2, false), "wait=10")
				if err != nil {
					bodies[i] = fmt.Sprintf("refused: %v", err)
					return
				}
				var c struct {
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				}
				if json.Unmarshal(r.body.Bytes(), &c) != nil || len(c.Choices) == 0 {
					bodies[i] = "not a completion: " + r.body.String()
					return
				}
				bodies[i] = c.Choices[0].Message.Content
			}()
		}
		wg.Wait()
		gens := w.generations(t, 1)
		if bodies[0] != gens[0].Content || bodies[1] != gens[0].Content {
			t.Fatalf("clients got %q and %q, the provider generated %q", bodies[0], bodies[1], gens[0].Content)
		}
		if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'in_progress'`); n != 0 {
			t.Fatalf("%d requests were told the key is in flight", n)
		}
	})
	t.Run("a streaming waiter gets the stream from its start", func(t *testing.T) {
		t.Parallel()
		w := newGatewayWorld(t, gatewaySetup{chunkDelay: 25 * time.Millisecond})
		first := make(chan *reply, 1)
		go func() {
			r, _ := w.call("shop", "msg-3", chatBody("stream the summary", 0.2, true))
			first <- r
		}()
		w.waitAdmitted(t, "msg-3") // the first stream is under way
		r, err := w.callOn(w.gw, "/v1/chat/completions", "shop", "msg-3", chatBody("stream the summary", 0.2, true), "wait=10")
		if err != nil || !r.head.Stream || !r.head.Replayed || r.head.PreferenceApplied != "wait=10" {
			t.Fatalf("waiter got %v %+v", err, r.head)
		}
		text, chunks, done := streamText(t, r)
		gens := w.generations(t, 1)
		if firstText, _, _ := streamText(t, <-first); !done || text != gens[0].Content || firstText != text {
			t.Fatalf("waiter streamed %q (done %v), provider generated %q", text, done, gens[0].Content)
		}
		if chunks != 26 { // role, 24 tokens, finish
			t.Fatalf("waiter got %d chunks, want all 26", chunks)
		}
	})
}

// heldAnswers holds the recording of a request's in_progress answer, which admission writes
// after it read the operation in flight, until the test lets it go.
type heldAnswers struct {
	ops.Store
	admitted chan struct{}
	release  chan struct{}
}

func (h *heldAnswers) AnswerClientRequest(ctx context.Context, id int64, a ops.Answer, at time.Time) error {
	if a == ops.AnswerInProgress {
		close(h.admitted)
		<-h.release
	}
	return h.Store.AnswerClientRequest(ctx, id, a, at)
}

// TestARepeatAdmittedInFlightIsReplayedWhenTheCloseLandsMeanwhile: a repeat read the
// operation in progress while the first request's close was being written, and the close
// landed, its run ended and its flight left this process before the repeat looked for the
// flight. The repeat is replayed from the record (ops rules 2, 3: one generation, the
// stored answer), not told 409 in flight about a call that is already answered and closed.
func TestARepeatAdmittedInFlightIsReplayedWhenTheCloseLandsMeanwhile(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		held := &heldAnswers{admitted: make(chan struct{}), release: make(chan struct{})}
		// The first request's provider answer is in, its close not yet written: the test
		// holds the provider's reply until the repeat is admitted, however slowly the
		// repeat gets there.
		untilAdmitted := func(llm.Call) {
			select {
			case <-held.admitted:
			case <-time.After(10 * time.Second):
				t.Errorf("stream %v: the repeat was not told in flight within 10 s of the provider's answer", stream)
			}
		}
		w := newGatewayWorld(t, gatewaySetup{latency: 300 * time.Millisecond, after: untilAdmitted,
			store: func(s ops.Store) ops.Store { held.Store = s; return held }})
		key := fmt.Sprintf("x-landed-%v", stream)
		first := make(chan error, 1)
		go func() {
			_, err := w.call("shop", key, chatBody("landed", 0.2, stream))
			first <- err
		}()
		w.waitAdmitted(t, key)
		repeat := make(chan error, 1)
		var r *reply
		go func() {
			var err error
			r, err = w.complete(&reply{}, w.gw, "/v1/chat/completions", "shop", key, chatBody("landed", 0.2, stream), "")
			repeat <- err
		}()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := w.gw.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(held.release)
		err := <-repeat
		if err != nil || !r.head.Replayed {
			t.Fatalf("stream %v: the repeat of a closed call was answered %v (replayed %v)", stream, err, r.head.Replayed)
		}
		w.generations(t, 1)
	}
}
