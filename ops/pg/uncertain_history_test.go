package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/opstest"
)

// interactiveCall is the policy of an interactive LLM call: its provider takes no key, and
// a resend after an uncertain attempt is allowed, counted.
var interactiveCall = ops.Policy{RetryUncertain: true, NoProviderKey: true}

// timedOutThenRefused opens an interactive LLM call as owner and records the history that
// the last attempt alone does not tell: attempt 1 timed out (the provider may have generated
// and billed it), attempt 2 was refused at the door with a 429. The operation is left in
// progress, still leased to owner.
func (f *fixture) timedOutThenRefused(t *testing.T, key, owner string) ops.Intent {
	t.Helper()
	ctx := context.Background()
	pol := interactiveCall
	in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "llm", IntentKey: key, Fingerprint: "fp-" + key,
		RequestRef: "req-1", Owner: owner, Policy: &pol}
	adm, err := f.ledger.Admit(ctx, in)
	if err != nil || adm.Verdict != ops.VerdictSend || adm.Attempt == nil {
		t.Fatalf("admit: %+v %v", adm, err)
	}
	op, err := f.seed().Finish(ctx, adm.Op, adm.Attempt, owner, ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout"})
	if err != nil || op.Status != ops.StatusInProgress {
		t.Fatalf("attempt 1: %+v %v", op, err)
	}
	op, a, err := opstest.New(f.ledger, f.db).BeginAttempt(ctx, op, owner)
	if err != nil {
		t.Fatal(err)
	}
	op, err = f.seed().Finish(ctx, op, a, owner, ops.AttemptResult{Outcome: ops.OutcomeRateLimited, HTTPStatus: 429, PossibleDuplicate: true})
	if err != nil || op.Status != ops.StatusInProgress {
		t.Fatalf("attempt 2: %+v %v", op, err)
	}
	return in
}

// lookups counts the lookups a run asks for before its sends; each finds nothing.
type lookups struct{ n int }

func (l *lookups) look(context.Context, *ops.Operation) (*ops.Found, error) {
	l.n++
	return nil, nil
}

// TestRetryAfterATimeoutAndARefusalIsLookedUpAndCounted: attempt 1 timed out, attempt 2 got
// a 429, and the sender went away (its client's request ended; or its process died and the
// lease ran out). The client's retry, or whoever takes the operation over, is admitted to
// send knowing that attempt 1 may have generated: the run looks it up before it sends, and
// the send is recorded as a possible duplicate (ops rules 3 and 8).
func TestRetryAfterATimeoutAndARefusalIsLookedUpAndCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, died := range []bool{false, true} {
		key := "released"
		if died {
			key = "died"
		}
		in := f.timedOutThenRefused(t, key, "w1")
		op, err := f.db.Get(ctx, mustLatest(t, f, key).ID)
		if err != nil {
			t.Fatal(err)
		}
		if died {
			f.clock.Advance(f.ledger.Limits.Lease + time.Second)
		} else if _, err := opstest.New(f.ledger, f.db).Release(ctx, op, "w1"); err != nil {
			t.Fatal(err)
		}
		in.Owner, in.RequestRef = "w2", "req-2"
		adm, err := f.ledger.Admit(ctx, in)
		if err != nil || adm.Verdict != ops.VerdictSend {
			t.Fatalf("%s: the retry's admission: %+v %v", key, adm, err)
		}
		if !adm.PossibleDuplicate {
			t.Fatalf("%s: the retry is admitted as no possible duplicate, though attempt 1 timed out", key)
		}
		var lk lookups
		sent := 0
		out, err := f.ledger.Run(ctx, adm.Op, ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
			sent++
			return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "chatcmpl-" + key}}
		}), ops.RunSpec{Owner: "w2", PossibleDuplicate: adm.PossibleDuplicate, Hooks: ops.Hooks{LookFirst: lk.look}})
		if err != nil || out.Status != ops.StatusSucceeded || sent != 1 {
			t.Fatalf("%s: run: %s after %d sends, %v", key, out.Status, sent, err)
		}
		if lk.n != 1 {
			t.Fatalf("%s: %d lookups before the resend, want 1", key, lk.n)
		}
		if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND n = 3 AND possible_duplicate`, op.ID); n != 1 {
			t.Fatalf("%s: the resend after attempt 1's timeout is not recorded as a possible duplicate", key)
		}
	}
}

// TestARunThatResumesReadsEveryAttempt: a caller that resumes an operation without saying
// that an earlier attempt was uncertain does not make the run send blind: the run reads
// the attempts itself, looks up first and counts the send (ops rules 3 and 8).
func TestARunThatResumesReadsEveryAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.timedOutThenRefused(t, "blind", "w1")
	op := mustLatest(t, f, "blind")
	var lk lookups
	out, err := f.ledger.Run(ctx, op, ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "chatcmpl-blind"}}
	}), ops.RunSpec{Owner: "w1", Hooks: ops.Hooks{LookFirst: lk.look}})
	if err != nil || out.Status != ops.StatusSucceeded {
		t.Fatalf("run: %+v %v", out, err)
	}
	if lk.n != 1 {
		t.Fatalf("%d lookups before the resend, want 1", lk.n)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND n = 3 AND possible_duplicate`, op.ID); n != 1 {
		t.Fatal("the resend after attempt 1's timeout is not recorded as a possible duplicate")
	}
}

// TestEverySendAfterAnUncertainAttemptIsCounted: in one run, attempt 1 times out, the
// lookup finds nothing, attempt 2 gets a 429, and attempt 3 is sent. Attempt 3 may generate
// what attempt 1 already did, as much as attempt 2 might have: it is looked up first and
// counted as a possible duplicate too (ops rules 3 and 8).
func TestEverySendAfterAnUncertainAttemptIsCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	pol := interactiveCall
	adm, err := f.ledger.Admit(ctx, ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "llm", IntentKey: "one-run",
		Fingerprint: "fp", RequestRef: "req-1", Owner: "w1", Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := []ops.Outcome{ops.OutcomeTimeout, ops.OutcomeRateLimited, ops.OutcomeOK}
	var lk lookups
	out, err := f.ledger.Run(ctx, adm.Op, ops.SenderFunc(func(_ context.Context, _ *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		res := ops.AttemptResult{Outcome: outcomes[a.N-1]}
		if res.Outcome == ops.OutcomeOK {
			res.Result = &ops.Result{ProviderRef: "chatcmpl-one-run"}
		}
		return res
	}), ops.RunSpec{Owner: "w1", First: adm.Attempt, Sleep: func(context.Context, time.Duration) error { return nil },
		Hooks: ops.Hooks{LookFirst: lk.look}})
	if err != nil || out.Status != ops.StatusSucceeded || out.Attempts != 3 {
		t.Fatalf("run: %s after %d attempts, %v", out.Status, out.Attempts, err)
	}
	if lk.n != 2 {
		t.Fatalf("%d lookups, want one before each send after the timeout", lk.n)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND possible_duplicate`, out.ID); n != 2 {
		t.Fatalf("%d sends counted as possible duplicates, want attempts 2 and 3", n)
	}
}

// TestReaperDoesNotResendAfterAnEarlierUncertainAttempt: a stalled operation of a provider
// that takes no key, whose attempt 1 timed out and attempt 2 got a 429, is not resent by the
// reaper, which asks no provider anything first: it is released for its client's retry,
// which looks it up before any resend (ops rules 3 and 11).
func TestReaperDoesNotResendAfterAnEarlierUncertainAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.timedOutThenRefused(t, "stalled", "dead-worker")
	sent := 0
	r := &ops.Reaper{Ledger: f.ledger, Owner: "reaper", ClientWait: 2 * time.Hour,
		Senders: map[ops.Kind]ops.Sender{ops.KindLLMCall: ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
			sent++
			return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "chatcmpl-reaped"}}
		})},
		Sleep: func(context.Context, time.Duration) error { return nil }}
	f.clock.Advance(f.ledger.Limits.Lease + time.Second)
	got, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 0 || got.Resent != 0 || got.Released != 1 {
		t.Fatalf("pass: %+v with %d sends; want the call released, nothing sent", got, sent)
	}
	op := mustLatest(t, f, "stalled")
	if op.Status != ops.StatusInProgress || op.Attempts != 2 || op.Leased(f.clock.Now()) {
		t.Fatalf("operation %s with %d attempts, leased until %v; want in progress, free for its client", op.Status, op.Attempts, op.LeaseUntil)
	}
}

func mustLatest(t *testing.T, f *fixture, key string) *ops.Operation {
	t.Helper()
	op, err := f.db.LatestForIntent(context.Background(), f.tenant, ops.KindLLMCall, key)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// TestRefusalAfterAnUncertainAttemptLeavesItUnknown: an LLM call's attempt 1 timed out and
// its resend was refused (the provider turned the gateway's credentials away). The refusal
// is the provider's word on attempt 2 only: its provider takes no key, so attempt 1 may
// still have generated and been billed, and the call does not become failed without
// evidence that nothing ran. It is unknown, for the reconciler's lookup or a person. A
// refund's refusal under its one key is Stripe's word on the key, and fails it (ops rule 11).
func TestRefusalAfterAnUncertainAttemptLeavesItUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	pol := interactiveCall
	for _, in := range []ops.Intent{
		{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "llm", IntentKey: "refused", Fingerprint: "fp", Policy: &pol},
		f.refund("refused", 500),
	} {
		o, err := f.seed().Open(ctx, in, "req-1", "w1")
		if err != nil {
			t.Fatal(err)
		}
		op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
		if err != nil || op.Status != ops.StatusInProgress {
			t.Fatalf("%s: attempt 1: %+v %v", in.Kind, op, err)
		}
		// The same call resends, and the provider refuses the resend.
		sends := 0
		refused := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
			sends++
			return ops.AttemptResult{Outcome: ops.OutcomeInvalid, HTTPStatus: 401, ErrorCode: "upstream_auth"}
		})
		op, err = f.ledger.Run(ctx, op, refused, ops.RunSpec{Owner: "w1", Sleep: func(context.Context, time.Duration) error { return nil }})
		want := ops.StatusUnknown
		if in.Kind == ops.KindRefund {
			want = ops.StatusFailed
		}
		if err != nil || sends != 1 || op.Status != want {
			t.Fatalf("%s: refusal after a timeout: %s after %d sends %v; want %s after 1", in.Kind, op.Status, sends, err, want)
		}
	}
}
