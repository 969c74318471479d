package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// A job submitted after the purge took its computation's bodies (the generation's text,
// the checkpoints' results) has nothing to be answered from: it generates anew, once, under
// a new operation, instead of failing for good as "result_unavailable" at every key the
// client tries.
func TestAJobAfterThePurgeGeneratesAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first := e.submit(t, e.tenant, "before-purge", docA, "v1")
	e.drain(t, e.worker("w1", false))
	ttl := 24 * time.Hour
	p := &llm.Purger{Store: purgestore.New(e.db), Clock: ops.NewManualClock(time.Now().Add(ttl + llm.DefaultBodyKeep + time.Hour)), JobTTL: ttl}
	if rep, err := p.RunOnce(ctx); err != nil || rep.Jobs != 1 || rep.Operations != 1 {
		t.Fatalf("purge: %+v %v", rep, err)
	}
	w := e.worker("w2", false)
	reuse := e.world.Jobs()
	reuse.Reuse = w
	// The API's reuse path meets the purged generation first, then a plain submission meets
	// the new one.
	for _, svc := range []*jobs.Service{reuse, e.svc} {
		key := "after-purge"
		if svc.Reuse != nil {
			key += "-reuse"
		}
		s, err := svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: key,
			Document: jobs.Document{Text: docA}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		e.drain(t, w)
		got := e.job(t, s.Job.ID)
		if got.Status != jobs.StatusPublished || len(got.Result) == 0 {
			t.Fatalf("%s: job %s %s %s", key, got.Status, got.ErrorCode, got.ErrorMessage)
		}
	}
	if gens := e.generations(t); gens[first.DedupKey] != 2 {
		t.Fatalf("generations %v: want the first and one new one after the purge", gens)
	}
	if n := e.count(t, `SELECT count(*) FROM operations WHERE intent_key = $1`, jobs.IntentKey(first.DedupKey)); n != 2 {
		t.Fatalf("%d operations for the computation, want 2", n)
	}
}
