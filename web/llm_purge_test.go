package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Bodies do not live forever: past the key's TTL and the keep, the purge deletes the
// prompt and the completion and leaves the operation, its usage and its fingerprint; a
// replay of the key then gets a problem of its own (410 answer_purged), never a 500, and
// nothing is generated again.
func TestLLMReplayAfterPurgeIsAnswerPurged(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	if resp := w.post(t, "shop", "k-purge", chatBody("hello", 0.2, false)); resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	before := w.op(t, "k-purge")
	ttl, keep := 24*time.Hour, llm.DefaultBodyKeep
	purge := func(at time.Time) llm.PurgeReport {
		t.Helper()
		rep, err := (&llm.Purger{Store: w.db, Clock: ops.NewManualClock(at), Keep: keep, JobTTL: ttl, Batch: 1}).RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := purge(before.CreatedAt.Add(ttl + keep - time.Minute)); rep.Operations != 0 {
		t.Fatalf("purged %d operations before the TTL and the keep passed", rep.Operations)
	}
	if rep := purge(before.CreatedAt.Add(ttl + keep + time.Minute)); rep.Operations != 1 {
		t.Fatalf("purged %d operations, want the one", rep.Operations)
	}
	after := w.op(t, "k-purge")
	if after.PurgedAt == nil || len(after.Request) != 0 || len(after.Result) != 0 {
		t.Fatalf("after the purge: purged_at %v, request %d bytes, result %d bytes", after.PurgedAt, len(after.Request), len(after.Result))
	}
	if after.Status != ops.StatusSucceeded || after.Fingerprint != before.Fingerprint || string(after.Usage) != string(before.Usage) ||
		after.CostMicros != before.CostMicros || after.Version != before.Version {
		t.Fatalf("the purge changed more than the bodies: %+v, was %+v", after, before)
	}
	// The gateway's clock has not moved: the key still replays, and finds no answer.
	p := wantProblem(t, w.post(t, "shop", "k-purge", chatBody("hello", 0.2, false)), http.StatusGone, llm.ReasonAnswerPurged)
	if p.Detail == "" {
		t.Fatal("the problem says nothing")
	}
	wantProblem(t, w.post(t, "shop", "k-purge", chatBody("hello", 0.2, true)), http.StatusGone, llm.ReasonAnswerPurged)
	w.generations(t, 1)
	if rep := purge(before.CreatedAt.Add(ttl + keep + time.Hour)); rep.Operations != 0 {
		t.Fatalf("a second purge purged %d operations again", rep.Operations)
	}
}
