package jobstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// jobFixture makes jobs of one dedup key straight through the jobs store, the way a worker
// leaves them, without running one.
type jobFixture struct {
	db     *pg.DB
	jobs   *jobstore.Store
	tenant int64
	dedup  string
}

func newJobFixture(t *testing.T, db *pg.DB, doc string) *jobFixture {
	t.Helper()
	tn, err := db.EnsureTenant(context.Background(), "docs")
	if err != nil {
		t.Fatal(err)
	}
	return &jobFixture{db: db, jobs: jobstore.New(db), tenant: tn.ID, dedup: jobs.DedupKey(tn.ID, doc, "summarise", "v1", "fast")}
}

// openGeneration opens the llm_job operation of the fixture's dedup key.
func (f *jobFixture) openGeneration(t *testing.T) *ops.Operation {
	t.Helper()
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: f.tenant, Kind: ops.KindLLMJob, Provider: "openai",
		IntentKey: jobs.IntentKey(f.dedup), ProviderKey: ops.NewProviderKey(), Fingerprint: f.dedup}
	o, err := f.db.Open(context.Background(), ops.OpenParams{Op: op, Now: t0, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return o.Op
}

// submit inserts a job with its uploaded checkpoint and, when op is set, records that the
// job uses it, as a worker does when it opens or joins the generation.
func (f *jobFixture) submit(t *testing.T, key string, at time.Time, op *ops.Operation) *jobs.Job {
	t.Helper()
	ctx := context.Background()
	j := &jobs.Job{ID: uuid.NewString(), TenantID: f.tenant, IdempotencyKey: key, RequestFingerprint: "fp-" + key,
		DedupKey: f.dedup, DocumentHash: "dh", Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast",
		MaxAttempts: 3, Deadline: at.Add(time.Hour), CreatedAt: at}
	j, _, err := f.jobs.InsertJob(ctx, j, jobs.Checkpoint{InputHash: "in-uploaded", CodeVersion: "up-1", Result: json.RawMessage(`{"bytes":10}`)})
	if err != nil {
		t.Fatal(err)
	}
	if op == nil {
		return j
	}
	if _, err := f.jobs.ClaimJob(ctx, j.ID, "w", at, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	j, err = f.jobs.ChangeJob(ctx, jobs.JobChange{ID: j.ID, Owner: "w", Now: at, Status: jobs.StatusRunning, OperationID: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (f *jobFixture) checkpoint(t *testing.T, j *jobs.Job, stage jobs.Stage, code, status string, at time.Time) {
	t.Helper()
	err := f.jobs.SaveCheckpoint(context.Background(), jobs.Checkpoint{TenantID: f.tenant, DedupKey: f.dedup, JobID: j.ID,
		Stage: stage, InputHash: "in-" + string(stage), CodeVersion: code, Status: status, Attempt: 1,
		Result: json.RawMessage(`{"stage":"` + string(stage) + `"}`), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
}

func TestJobsForOperationListsJobsWithTheirCheckpoints(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	f := newJobFixture(t, db, "doc-1")
	op := f.openGeneration(t)
	first := f.submit(t, "k1", t0, op)
	second := f.submit(t, "k2", t0.Add(time.Second), op)
	f.submit(t, "k3", t0.Add(2*time.Second), nil) // queued: no operation yet
	for i, s := range []jobs.Stage{jobs.StageTextExtracted, jobs.StageChunksReady, jobs.StageLLMDone} {
		f.checkpoint(t, first, s, "v1", jobs.CheckpointOK, t0.Add(time.Duration(i+1)*time.Minute))
	}
	// A new validator version validates again: the newer one is shown.
	f.checkpoint(t, first, jobs.StageValidated, "val-1", jobs.CheckpointFailed, t0.Add(5*time.Minute))
	f.checkpoint(t, first, jobs.StageValidated, "val-2", jobs.CheckpointOK, t0.Add(6*time.Minute))
	_, published, err := js.PublishJob(ctx, jobs.PublishParams{Job: first, Owner: "w", Now: t0.Add(7 * time.Minute),
		Result: json.RawMessage(`{"summary":"s"}`), EventID: uuid.NewString(), Payload: json.RawMessage(`{}`),
		Checkpoint: jobs.Checkpoint{InputHash: "in-published", CodeVersion: "pub-1", Attempt: 1}})
	if err != nil || !published {
		t.Fatalf("publish: %v %v", published, err)
	}

	got, err := js.JobsForOperation(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Job.ID != first.ID || got[1].Job.ID != second.ID {
		t.Fatalf("jobs = %+v, want %s then %s", got, first.ID, second.ID)
	}
	if got[0].Job.Status != jobs.StatusPublished || got[1].Job.Status != jobs.StatusRunning {
		t.Errorf("statuses %s, %s", got[0].Job.Status, got[1].Job.Status)
	}
	for n, oj := range got {
		if len(oj.Checkpoints) != len(jobs.Stages) {
			t.Fatalf("job %d: %d stages", n, len(oj.Checkpoints))
		}
		for i, c := range oj.Checkpoints {
			published := jobs.Stages[i] == jobs.StagePublished
			if n == 1 && published {
				if c != nil {
					t.Errorf("the second job shows the first one's publication: %+v", c)
				}
				continue
			}
			if c == nil || c.Stage != jobs.Stages[i] {
				t.Fatalf("job %d stage %d = %+v, want %s", n, i, c, jobs.Stages[i])
			}
		}
		if v := oj.Checkpoints[4]; v.CodeVersion != "val-2" || v.Status != jobs.CheckpointOK {
			t.Errorf("job %d validated = %s %s, want the newer val-2 ok", n, v.CodeVersion, v.Status)
		}
	}
	if c := got[0].Checkpoints[5]; c.JobID != first.ID || c.CodeVersion != "pub-1" {
		t.Errorf("published checkpoint %+v", c)
	}

	for _, id := range []string{"not-a-uuid", uuid.NewString()} {
		if none, err := js.JobsForOperation(ctx, id); err != nil || len(none) != 0 {
			t.Errorf("%s: %v %v", id, none, err)
		}
	}
	// An operation of another kind has no jobs, whatever its intent key says.
	other := &ops.Operation{ID: ops.NewOperationID(), TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai",
		IntentKey: jobs.IntentKey(f.dedup), ProviderKey: ops.NewProviderKey(), Fingerprint: "fp"}
	if _, err := db.Open(ctx, ops.OpenParams{Op: other, Now: t0, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if none, err := js.JobsForOperation(ctx, other.ID); err != nil || len(none) != 0 {
		t.Errorf("llm_call: %v %v", none, err)
	}
}

func TestJobsForOperationUsesIndexes(t *testing.T) {
	// Plans are about scale, and filling the tables for them is most of a quick run's time.
	testtool.Heavy(t, "the job lookups' plans on thousands of rows")
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	f := newJobFixture(t, db, "doc-1")
	op := f.openGeneration(t)
	j := f.submit(t, "k1", t0, op)
	// Bulk rows straight in SQL: the plans depend on the tables' size, not on how they grew.
	for _, q := range []string{
		`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_at, closed_by)
		 SELECT gen_random_uuid(), $1, 'llm_job', 'openai', 'job:d' || g, 'k' || g, 'd' || g, 'succeeded', now(), now(), now(), 'w'
		 FROM generate_series(1, 5000) g`,
		`INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
			prompt_version, model_profile, status, operation_id, run_after, max_attempts, deadline, created_at, updated_at, published_at)
		 SELECT gen_random_uuid(), o.tenant_id, o.fingerprint || '-' || g, 'fp', o.fingerprint, 'dh', 'summarise', 'v1', 'fast', 'published',
			o.id, now(), 3, now(), now(), now(), now()
		 FROM operations o, generate_series(1, 2) g WHERE o.intent_key LIKE 'job:d%'`,
		`INSERT INTO job_checkpoints (tenant_id, dedup_key, job_id, stage, input_hash, code_version, status, created_at, updated_at)
		 SELECT j.tenant_id, j.dedup_key, j.id, s, 'in', 'v1', 'ok', now(), now()
		 FROM jobs j, unnest(ARRAY['uploaded','text_extracted','chunks_ready','llm_done','validated','published']) s
		 WHERE j.idempotency_key LIKE '%-1'`,
		`ANALYZE`,
	} {
		if _, err := db.Pool.Exec(ctx, q, pgxArgs(q, f.tenant)...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	plans, err := js.JobsForOperationPlans(ctx, op.ID, f.dedup, []string{j.ID})
	if err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		for _, table := range []string{"operations", "jobs", "job_checkpoints"} {
			if strings.Contains(plan, "Seq Scan on "+table) {
				t.Errorf("%s: sequential scan of %s:\n%s", name, table, plan)
			}
		}
	}
}

// pgxArgs passes the tenant to the statements that take it.
func pgxArgs(q string, tenant int64) []any {
	if strings.Contains(q, "$1") {
		return []any{tenant}
	}
	return nil
}
