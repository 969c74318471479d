package jobs_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
)

// One Idempotency-Key and one document sent by two tenants are two intents and two
// computations (ops doc, Keys): the second tenant's job is its own, is not answered from the
// first tenant's published generation (not even by the API's reuse path), is generated and
// paid for once for itself, and neither tenant reads the other's job.
func TestTwoTenantsWithOneKeyAndOneDocumentShareNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	other := e.world.Tenant("other").ID
	w := e.worker("w1", false)
	first := e.submit(t, e.tenant, "same-key", docA, "v1")
	e.drain(t, w)
	reuse := e.world.Jobs()
	reuse.Reuse = w
	s, err := reuse.Submit(ctx, jobs.Submission{TenantID: other, IdempotencyKey: "same-key",
		Document: jobs.Document{Text: docA}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if err != nil || !s.Created || s.Job.ID == first.ID || s.Job.DedupKey == first.DedupKey || s.Job.Status != jobs.StatusQueued {
		t.Fatalf("the other tenant's submission: %+v %v, want a new queued job of its own computation", s.Job, err)
	}
	e.drain(t, w)
	a, b := e.job(t, first.ID), e.job(t, s.Job.ID)
	if a.Status != jobs.StatusPublished || b.Status != jobs.StatusPublished || a.OperationID == b.OperationID {
		t.Fatalf("jobs %s/%s on operations %s and %s, want both published on their own", a.Status, b.Status, a.OperationID, b.OperationID)
	}
	if gens := e.generations(t); gens[a.DedupKey] != 1 || gens[b.DedupKey] != 1 {
		t.Fatalf("generations %v, want one per tenant", gens)
	}
	for _, c := range []struct {
		tenant int64
		id     string
	}{{e.tenant, b.ID}, {other, a.ID}} {
		if _, _, err := e.svc.Get(ctx, c.tenant, c.id); ops.ErrorCode(err) != ops.ENOTFOUND {
			t.Errorf("tenant %d read job %s of another tenant: %v", c.tenant, c.id, err)
		}
	}
}
