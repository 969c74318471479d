package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestReconcilerComparesEachAPIWithItsOwnUsageReport: the provider reports embeddings apart
// from completions, so the reconciler reads both reports and compares each with the attempts
// of its own route. Embeddings traffic beside chat completions is in order; an embeddings
// call billed twice (a resend after a timeout the provider billed) is reported on the
// embeddings report, and the chat completions of the same hour are not (ops rule 3).
func TestReconcilerComparesEachAPIWithItsOwnUsageReport(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{reconciled: true})
	r := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	ctx := context.Background()
	c := w.sdk("shop")
	w.clock.Set(w.clock.Now().Truncate(time.Hour).Add(5 * time.Minute))
	if _, err := c.Chat.Completions.New(ctx, ask("what is settled once", 0), keyed("usage-chat-1")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"usage-emb-1", "usage-emb-2"} {
		if _, err := c.Embeddings.New(ctx, embed(64), keyed(key)); err != nil {
			t.Fatal(err)
		}
	}
	w.generations(t, 3)
	drain(t, w)
	w.clock.Advance(2 * time.Hour)
	reps, err := r.RunOnce(ctx)
	if err != nil || len(reps) != 1 {
		t.Fatalf("reports %+v, %v", reps, err)
	}
	if reps[0].Billed != 3 || reps[0].Answered != 3 || reps[0].UsageMismatch != 0 || reps[0].Looked != 0 {
		t.Fatalf("embeddings beside chat: %s", reps[0].Summary())
	}

	// The next hour: one chat completion, and one embeddings call whose first generation
	// the provider billed and then timed out; the interactive policy resends it.
	w.fake.AddFault(fake.LLMFault{Path: "/v1/embeddings", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	if _, err := c.Embeddings.New(ctx, embed(64), keyed("usage-emb-twice")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat.Completions.New(ctx, ask("what is billed twice", 0), keyed("usage-chat-2")); err != nil {
		t.Fatal(err)
	}
	w.generations(t, 6)
	drain(t, w)
	w.clock.Advance(2 * time.Hour)
	if reps, err = r.RunOnce(ctx); err != nil || reps[0].UsageMismatch != 1 {
		t.Fatalf("a double-billed embeddings call: %+v, %v", reps, err)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'usage_mismatch' AND severity = 'low'
	AND ref LIKE 'embeddings %' AND summary LIKE '%embeddings%'`); n != 1 {
		t.Fatalf("%d low usage mismatches on the embeddings report, want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'usage_mismatch'`); n != 1 {
		t.Fatalf("%d usage mismatches, want only the embeddings one", n)
	}

	// An embeddings call left unknown is not searched for among stored chat completions:
	// the reconciler does not count it as looked up, and it stays for a person.
	w.fake.AddFault(fake.LLMFault{Path: "/v1/embeddings", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	batch := w.sdk("pipeline")
	if _, err := batch.Embeddings.New(ctx, embed(64), keyed("usage-emb-unknown")); err == nil {
		t.Fatal("a batch embeddings call that timed out answered")
	}
	w.clock.Advance(recon.LookupGrace + time.Second)
	if reps, err = r.RunOnce(ctx); err != nil || reps[0].Looked != 0 || reps[0].Closed != 0 {
		t.Fatalf("an unknown embeddings call: %+v, %v", reps, err)
	}
	if op := w.op(t, "usage-emb-unknown"); op.Status != ops.StatusUnknown {
		t.Fatalf("the unknown embeddings call is %s", op.Status)
	}
}

// drain waits for the closes the gateway writes after its early answers: the reconciler
// counts a call answered by its closed attempt, and an answer reaches the client before it.
func drain(t *testing.T, w *lookupWorld) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}
