package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// TestRetryAfterATimeoutAndA429IsLookedUpBeforeAnyResend: the provider billed a call's
// first attempt and stores its completion, but shows it only a minute later; the answer
// timed out, the lookup before the resend found nothing yet, and the resend got a 429 whose
// wait outlasted the request. The operation's last attempt is that 429, but its first may
// have generated: the client's retry with the key asks the provider's store before it
// sends anything, and is answered with the completion the first attempt made. One
// generation billed (ops rule 3).
func TestRetryAfterATimeoutAndA429IsLookedUpBeforeAnyResend(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	ctx := context.Background()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1, Lag: time.Minute})
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultRateLimit, RetryAfter: 3600, Times: 1})
	resp := w.post(t, "shop", "timeout-then-429", chatBody("billed once, stored late", 0, false))
	// The 429 ended the request, but its answer says no more than Settle knows: the first
	// attempt may have been billed (ops rule 12).
	if p := wantProblem(t, resp, 429, llm.ReasonRateLimited); strings.Contains(p.Detail, "nothing was billed") || !strings.Contains(p.Detail, "may have been") {
		t.Fatalf("the 429's answer: %q; want it to say an earlier attempt may have been billed", p.Detail)
	}
	op := w.op(t, "timeout-then-429")
	atts, err := w.db.Attempts(ctx, op.ID)
	if err != nil || len(atts) != 2 || atts[0].Outcome != ops.OutcomeTimeout || atts[1].Outcome != ops.OutcomeRateLimited || op.Status != ops.StatusInProgress {
		t.Fatalf("operation %s with attempts %+v %v; want a timeout then a 429, in progress", op.Status, atts, err)
	}
	gens := w.generations(t, 1)
	// The provider now shows what the first attempt generated.
	w.clock.Advance(2 * time.Minute)

	c := w.sdk("shop")
	out, err := c.Chat.Completions.New(ctx, ask("billed once, stored late", 0), keyed("timeout-then-429"))
	if n := len(w.fake.GenerationsOf(fake.APIChatCompletions)); n != 1 {
		t.Fatalf("the provider generated %d chat completions, want 1: the retry sent again without looking attempt 1 up", n)
	}
	if err != nil || out.ID != gens[0].ID || out.Choices[0].Message.Content != gens[0].Content {
		t.Fatalf("the retry: %v %+v; the provider made %s", err, out, gens[0].ID)
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
	w := newLookupWorld(t, lookupSetup{})
	ctx := context.Background()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/chat/completions", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	before := w.gw.Stats()
	c := w.sdk("shop")
	out, err := c.Chat.Completions.New(ctx, ask("billed, then timed out", 0), keyed("billed-then-timeout"))
	gens := w.generations(t, 1)
	if err != nil || out.ID != gens[0].ID {
		t.Fatalf("the call: %v %+v; the provider made %s", err, out, gens[0].ID)
	}
	again, err := c.Chat.Completions.New(ctx, ask("billed, then timed out", 0), keyed("billed-then-timeout"))
	if err != nil || again.ID != gens[0].ID {
		t.Fatalf("the client's retry: %v %+v", err, again)
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
