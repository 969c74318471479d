package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestReconcilerClosesLLMUnknownsFromStoredCompletions: the reconciler leaves a fresh
// unknown call to people for a grace period, then finds its stored completion and closes
// it with the answer stored; the retry replays it, the exception queue shows what it did,
// and the provider's usage of that hour is explained, not reported as a double bill.
func TestReconcilerClosesLLMUnknownsFromStoredCompletions(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{reconciled: true})
	op, gen := w.billedThenTimedOut(t, "doc-8", "classify document 8")
	r := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	ctx := context.Background()
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.op(t, "doc-8"); got.Status != ops.StatusUnknown {
		t.Fatalf("closed within the grace period: %s", got.Status)
	}
	w.clock.Advance(recon.LookupGrace + time.Second)
	reps, err := r.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].Closed != 1 || reps[0].Looked != 1 {
		t.Fatalf("reports %+v, %v", reps, err)
	}
	got := w.op(t, "doc-8")
	if got.Status != ops.StatusSucceeded || got.ProviderRef != gen.ID || len(got.Result) == 0 {
		t.Fatalf("operation %s %s", got.Status, got.ProviderRef)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'explained_unknown' AND operation_id = $1 AND status = 'resolved'`, op.ID); n != 1 {
		t.Fatalf("%d explained_unknown exceptions, want 1", n)
	}
	c := w.sdk("pipeline")
	out, err := c.Chat.Completions.New(ctx, ask("classify document 8", 0), keyed("doc-8"))
	if err != nil || out.Choices[0].Message.Content != gen.Content {
		t.Fatalf("the retry: %v %+v", err, out)
	}

	// Once the hour is complete, the usage report's one billed request is the completion
	// found: no mismatch.
	w.clock.Advance(2 * time.Hour)
	if reps, err = r.RunOnce(ctx); err != nil || reps[0].Billed != 1 || reps[0].UsageMismatch != 0 {
		t.Fatalf("usage reports %+v, %v", reps, err)
	}
	w.generations(t, 1)
}
