package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// A call the provider billed and whose answer timed out: under the batch policy nothing
// more is sent and the operation is unknown; under the interactive one the gateway sends
// again and counts the resend as a possible duplicate.
func TestLLMUpstreamBillsThenTimesOut(t *testing.T) {
	t.Parallel()
	setup := gatewaySetup{attemptTimeout: 300 * time.Millisecond, modes: map[string]llm.Mode{"pipeline": llm.Batch}}
	fault := fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Calls: []int{1}, Delay: 3 * time.Second}

	t.Run("batch sends nothing more", func(t *testing.T) {
		t.Parallel()
		w := newGatewayWorld(t, setup)
		w.fake.AddFault(fault)
		r, err := w.call("pipeline", "doc-1", chatBody("classify document 1", 0, false))
		wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
		op := w.op(t, "doc-1")
		if op.Status != ops.StatusUnknown {
			t.Fatalf("operation is %s, want unknown", op.Status)
		}
		w.generations(t, 1)
		// The retry is told the truth and sends nothing.
		r, err = w.call("pipeline", "doc-1", chatBody("classify document 1", 0, false))
		wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown)
		w.generations(t, 1)
		if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, op.ID); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
		if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND outcome = 'timeout' AND error_code = 'upstream_timeout'`, op.ID); n != 1 {
			t.Fatal("the timed-out attempt is not recorded as a timeout")
		}
	})
	t.Run("interactive resends and counts a possible duplicate", func(t *testing.T) {
		t.Parallel()
		w := newGatewayWorld(t, setup)
		w.fake.AddFault(fault)
		r, err := w.call("shop", "chat-9", chatBody("answer the customer", 0.2, false))
		id, _ := completion(t, r, err)
		gens := w.generations(t, 2) // the provider billed both sends
		op := w.op(t, "chat-9")
		if op.Status != ops.StatusSucceeded || id != gens[1].ID || op.ProviderRef != gens[1].ID {
			t.Fatalf("operation %s %s, client got %s, provider %s", op.Status, op.ProviderRef, id, gens[1].ID)
		}
		// The second send followed an uncertain attempt: a possible duplicate, counted in
		// the ledger (from the attempts) and on the operation's usage.
		if n := w.count(t, `SELECT count(*) FROM attempts a JOIN attempts p ON p.operation_id = a.operation_id AND p.n = a.n - 1
			WHERE a.operation_id = $1 AND p.outcome IN ('timeout', 'key_in_use')`, op.ID); n != 1 {
			t.Fatalf("%d possible duplicates in the ledger, want 1", n)
		}
		// The attempts carry the flag themselves, and the answering one its cost, and its
		// usage, which is its operation's (the close keeps one copy, on the operation).
		if n := w.count(t, `SELECT count(*) FROM attempts a JOIN operations o ON o.id = a.operation_id
			WHERE a.operation_id = $1 AND a.possible_duplicate AND a.n = 2
			AND coalesce(a.usage, o.usage) IS NOT NULL AND a.cost_micros > 0`, op.ID); n != 1 {
			t.Fatalf("the second attempt is not marked a possible duplicate with its usage and cost")
		}
		if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND n = 1 AND NOT possible_duplicate`, op.ID); n != 1 {
			t.Fatalf("the first attempt is marked a possible duplicate")
		}
		var u struct {
			PossibleDuplicates int `json:"possible_duplicates"`
			Attempt            int `json:"attempt"`
		}
		_ = json.Unmarshal(op.Usage, &u)
		if u.PossibleDuplicates != 1 || u.Attempt != 2 || w.gw.Stats().PossibleDuplicates != 1 {
			t.Fatalf("usage %s, stats %+v", op.Usage, w.gw.Stats())
		}
		if gens[0].ClientRequestID != op.ID+".1" || gens[1].ClientRequestID != op.ID+".2" {
			t.Fatalf("the provider saw client request ids %q and %q", gens[0].ClientRequestID, gens[1].ClientRequestID)
		}
	})
}

// TestRetryAfterATimeoutAndA429IsLookedUpBeforeAnyResend: the provider billed a call's
// first attempt and stores its completion, but shows it only a minute later; the answer
// timed out, the lookup before the resend found nothing yet, and the resend got a 429 whose
// wait outlasted the request. The operation's last attempt is that 429, but its first may
// have generated: the client's retry with the key asks the provider's store before it
// sends anything, and is answered with the completion the first attempt made. One
// generation billed (ops rule 3).
func TestRetryAfterATimeoutAndA429IsLookedUpBeforeAnyResend(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1, Lag: time.Minute})
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultRateLimit, RetryAfter: 3600, Times: 1})
	r, err := w.call("shop", "timeout-then-429", chatBody("billed once, stored late", 0, false))
	// The 429 ended the request, but its answer says no more than Settle knows: the first
	// attempt may have been billed (ops rule 12).
	if said := wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonRateLimited); strings.Contains(said, "nothing was billed") || !strings.Contains(said, "may have been") {
		t.Fatalf("the 429's answer: %q; want it to say an earlier attempt may have been billed", said)
	}
	op := w.op(t, "timeout-then-429")
	atts, err := w.db.Attempts(ctx, op.ID)
	if err != nil || len(atts) != 2 || atts[0].Outcome != ops.OutcomeTimeout || atts[1].Outcome != ops.OutcomeRateLimited || op.Status != ops.StatusInProgress {
		t.Fatalf("operation %s with attempts %+v %v; want a timeout then a 429, in progress", op.Status, atts, err)
	}
	gens := w.generations(t, 1)
	// The provider now shows what the first attempt generated.
	w.clock.Advance(2 * time.Minute)

	r, err = w.call("shop", "timeout-then-429", chatBody("billed once, stored late", 0, false))
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1: the retry sent again without looking attempt 1 up", n)
	}
	if id, content := completion(t, r, err); id != gens[0].ID || content != gens[0].Content {
		t.Fatalf("the retry: %s %q; the provider made %s", id, content, gens[0].ID)
	}
	if op = w.op(t, "timeout-then-429"); op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID {
		t.Fatalf("operation %s %s, want succeeded with %s", op.Status, op.ProviderRef, gens[0].ID)
	}
}

// TestALookupBeforeAResendIsNoSend: the provider billed and stored a call's first attempt,
// and its answer timed out. The gateway's lookup before the resend finds the completion and
// answers with it, and records what it is: the lookup, as the evidence that closed the
// operation, and no attempt. The operation's one attempt is the timeout that billed; nothing
// counts a send or a possible duplicate that never happened, neither the attempts that the
// rollups, alerts and reconciler read nor the gateway's own counters (ops rule 8). The
// client's retry replays the same completion.
func TestALookupBeforeAResendIsNoSend(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	before := w.gw.Stats()
	r, err := w.call("shop", "billed-then-timeout", chatBody("billed, then timed out", 0, false))
	gens := w.generations(t, 1)
	if id, _ := completion(t, r, err); id != gens[0].ID {
		t.Fatalf("the call answered %s; the provider made %s", id, gens[0].ID)
	}
	r, err = w.call("shop", "billed-then-timeout", chatBody("billed, then timed out", 0, false))
	if id, _ := completion(t, r, err); id != gens[0].ID {
		t.Fatalf("the client's retry answered %s", id)
	}
	w.generations(t, 1)
	op := w.op(t, "billed-then-timeout")
	if op.Status != ops.StatusSucceeded || op.ProviderRef != gens[0].ID {
		t.Fatalf("operation %s %s, want succeeded with %s", op.Status, op.ProviderRef, gens[0].ID)
	}
	atts, err := w.db.Attempts(ctx, op.ID)
	if err != nil || len(atts) != 1 || atts[0].Outcome != ops.OutcomeTimeout {
		t.Fatalf("attempts %+v %v; want the one timeout that billed, no attempt for the lookup", atts, err)
	}
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND (possible_duplicate OR outcome = 'ok')`, op.ID); n != 0 {
		t.Fatalf("%d attempts counted as answered sends or possible duplicates, want 0", n)
	}
	if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup' AND provider_ref = $2`, op.ID, gens[0].ID); n != 1 {
		t.Fatalf("%d lookups recorded as the evidence that found %s, want 1", n, gens[0].ID)
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1 AND charge_ref = $2`, op.ID, gens[0].ID); n != 1 {
		t.Fatalf("%d provider charges recorded for the completion found, want 1", n)
	}
	after := w.gw.Stats()
	if sent, dups := after.UpstreamCalls-before.UpstreamCalls, after.PossibleDuplicates-before.PossibleDuplicates; sent != 1 || dups != 0 {
		t.Fatalf("the gateway counts %d sends and %d possible duplicates, want 1 and 0", sent, dups)
	}
}

// breakStream sends one streamed call of the interactive tenant shop to route whose stream
// the provider drops after its first chunks, while it goes on generating and storing the
// answer: the client has part of a stream, the operation waits for the client's retry.
func (w *gatewayWorld) breakStream(t *testing.T, route, key, body string) {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Path: route, Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	if r, err := w.callOn(w.gw, route, "shop", key, body, ""); err != nil || !r.began {
		t.Fatalf("the streamed call: %v, answer began %v", err, r.began)
	}
}

// TestRetryOfAnUncertainCallIsLookedUpBeforeAnyResend: the client's retry of a call whose
// attempt may have generated is not sent again while the provider holds what that attempt
// generated: a chat completion stored under the operation's id, a response under the id
// recorded on the attempt. The retry gets it, and the provider generated once (ops rule 3).
func TestRetryOfAnUncertainCallIsLookedUpBeforeAnyResend(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()

	w.breakStream(t, "/v1/chat/completions", "lf-chat", chatBody("what was generated once", 0, true))
	chats := w.fake.GenerationsOf(fake.APIChatCompletions)
	if len(chats) != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", len(chats))
	}
	r, err := w.call("shop", "lf-chat", chatBody("what was generated once", 0, false))
	if id, content := completion(t, r, err); id != chats[0].ID || content != chats[0].Content {
		t.Fatalf("the retry: %s %q; the provider made %s", id, content, chats[0].ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions after the retry, want 1", n)
	}

	w.breakStream(t, "/v1/responses", "lf-resp", `{"model":"fake-small","input":"what was answered once","stream":true}`)
	resps := w.fake.GenerationsOf(fake.APIResponses)
	if len(resps) != 1 {
		t.Fatalf("the provider generated %d responses, want 1", len(resps))
	}
	// The provider finishes the response it stores, whoever still reads its stream.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := w.up.GetResponse(ctx, resps[0].ID)
		if err == nil && s.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider's response %s: %v", resps[0].ID, err)
		}
	}
	r, err = w.callOn(w.gw, "/v1/responses", "shop", "lf-resp", `{"model":"fake-small","input":"what was answered once"}`, "")
	var again responses.Response
	if err != nil || json.Unmarshal(r.body.Bytes(), &again) != nil || again.ID != resps[0].ID || again.OutputText() != resps[0].Content {
		t.Fatalf("the retry: %v %s; the provider made %s", err, r.body.Bytes(), resps[0].ID)
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 1 {
		t.Fatalf("the provider generated %d responses after the retry, want 1", n)
	}
}

// TestAStalledCallWhoseClientIsGoneIsSettledByItsLookup: an interactive call whose stream
// broke, whose completion the provider stored, and whose client never came back is not
// released for that client at every reaper pass until its key expires: once the client's
// wait has passed, the reaper marks it unknown, the reconciler finds the completion and closes
// it with it, nothing is sent again, and a late retry of the key replays it (ops rules 3, 11).
func TestAStalledCallWhoseClientIsGoneIsSettledByItsLookup(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, reconciled: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	w.breakStream(t, "/v1/chat/completions", "gone-chat", chatBody("a client that left", 0, true))
	chats := w.fake.GenerationsOf(fake.APIChatCompletions)
	if len(chats) != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", len(chats))
	}
	reaper := &ops.Reaper{Ledger: w.ledger, Owner: "reaper"}
	// Within the client's wait the reaper leaves the call for its client.
	w.clock.Advance(w.ledger.Limits.Lease + time.Second)
	if _, err := reaper.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if op := w.op(t, "gone-chat"); op.Status != ops.StatusInProgress {
		t.Fatalf("the call is %s within its client's wait", op.Status)
	}
	w.clock.Advance(ops.DefaultClientWait + w.ledger.Limits.Lease)
	got, err := reaper.RunOnce(ctx)
	if err != nil || got.Unknown != 1 || got.Released != 0 || got.Resent != 0 {
		t.Fatalf("the pass after the client's wait: %+v, %v", got, err)
	}
	r := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&openai.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	if reps, err := r.RunOnce(ctx); err != nil || len(reps) != 1 || reps[0].Closed != 1 {
		t.Fatalf("reconciler: %+v, %v", reps, err)
	}
	if op := w.op(t, "gone-chat"); op.Status != ops.StatusSucceeded || op.ProviderRef != chats[0].ID {
		t.Fatalf("operation %s %s, want succeeded with %s", op.Status, op.ProviderRef, chats[0].ID)
	}
	late, err := w.call("shop", "gone-chat", chatBody("a client that left", 0, false))
	if id, _ := completion(t, late, err); id != chats[0].ID {
		t.Fatalf("the late retry answered %s", id)
	}
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1", n)
	}
}
