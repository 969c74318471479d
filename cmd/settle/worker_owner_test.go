package main

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

// Two replicas started with one SETTLE_WORKER_ID still fence each other's jobs: once the
// second takes over a job whose lease ran out under the first (paused, or only slow), the
// first one's late writes to it are refused, as they are between replicas with their own
// ids. Before, both replicas' first workers had one owner name, which every guarded write of
// a job is matched on, so the paused one went on changing the job the other now ran.
func TestJobWorkersOfTwoReplicasWithOneWorkerIDFenceEachOther(t *testing.T) {
	t.Parallel()
	w := testworld.New(t)
	_, base := w.LLM(fake.LLMOptions{Seed: 7})
	ctx := context.Background()
	replica := func() *jobs.Worker {
		t.Helper()
		cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(map[string]string{
			"DATABASE_URL": w.DatabaseURL, "SETTLE_LLM_BASE_URL": base, "SETTLE_LLM_API_KEY": "sk-serve",
			"SETTLE_WORKER_ID": "settle-1"}), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		p.DB, p.Ledger = w.DB, ops.NewLedger(w.DB, p.Clock)
		jc, err := jobsConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := p.jobPool(jc, 1)
		if err != nil {
			t.Fatal(err)
		}
		return pool.Workers[0]
	}
	a, b := replica(), replica()
	s, err := (&jobs.Service{Store: jobstore.New(w.DB), Clock: ops.SystemClock{}}).Submit(ctx, jobs.Submission{
		TenantID: w.Tenant("replicas").ID, IdempotencyKey: "fenced", Document: jobs.Document{Text: "One job, two replicas."},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	store := jobstore.New(w.DB)
	now := time.Now()
	if got, err := store.ClaimJobs(ctx, a.Owner, now, now.Add(time.Second), 1); err != nil || len(got) != 1 {
		t.Fatalf("first replica's claim: %v %v", got, err)
	}
	// The first replica's lease runs out; the second takes the job over.
	later := now.Add(2 * time.Second)
	if got, err := store.ClaimJobs(ctx, b.Owner, later, later.Add(time.Minute), 1); err != nil || len(got) != 1 || got[0].ID != s.Job.ID {
		t.Fatalf("second replica's takeover: %v %v", got, err)
	}
	_, err = store.ChangeJob(ctx, jobs.JobChange{ID: s.Job.ID, Owner: a.Owner, Now: later, Status: jobs.StatusFailed,
		ErrorCode: "late", ErrorMessage: "the paused replica's late write"})
	if ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("the first replica changed a job the second holds: %v", err)
	}
	if err := store.ExtendJob(ctx, s.Job.ID, a.Owner, later, later.Add(time.Hour)); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("the first replica renewed the second's lease: %v", err)
	}
}
