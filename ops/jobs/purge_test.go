package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// A published job's bodies go with its generation's, past the TTL and the keep: the
// document, the result, the checkpoints' results, and the llm_job operation's prompt and
// completion. The rows stay; a job still running keeps everything.
func TestPurgeDeletesJobBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	j := e.submit(t, e.tenant, "purge-me", docA, "v1")
	e.drain(t, e.worker("w1", false))
	queued := e.submit(t, e.tenant, "still-queued", docB, "v1")
	ttl := 24 * time.Hour
	p := &llm.Purger{Store: purgestore.New(e.db), Clock: ops.NewManualClock(time.Now().Add(ttl + llm.DefaultBodyKeep + time.Hour)), JobTTL: ttl}
	rep, err := p.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 1 || rep.Operations != 1 {
		t.Fatalf("purged %+v, want the published job and its generation", rep)
	}
	if n := e.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND purged_at IS NOT NULL AND document_text IS NULL AND result IS NULL
		AND status = 'published'`, j.ID); n != 1 {
		t.Fatal("the published job kept its bodies")
	}
	if n := e.count(t, `SELECT count(*) FROM job_checkpoints WHERE job_id = $1 AND result IS NOT NULL`, j.ID); n != 0 {
		t.Fatalf("%d checkpoints kept their results", n)
	}
	if n := e.count(t, `SELECT count(*) FROM operations WHERE kind = 'llm_job' AND purged_at IS NOT NULL AND request IS NULL
		AND result IS NULL AND usage IS NOT NULL AND fingerprint <> ''`); n != 1 {
		t.Fatal("the generation kept its bodies, or lost its usage or fingerprint")
	}
	if n := e.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND purged_at IS NULL AND document_text IS NOT NULL`, queued.ID); n != 1 {
		t.Fatal("a queued job lost its document")
	}
}
