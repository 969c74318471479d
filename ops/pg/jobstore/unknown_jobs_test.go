package jobstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// stuckJobs gives the tenant named name n jobs whose generation is unknown, each under an
// llm_job operation of its own that nobody has closed, as a provider outage leaves them.
func stuckJobs(t *testing.T, db *pg.DB, name string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.EnsureTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_by)
		 SELECT gen_random_uuid(), t.id, 'llm_job', 'openai', 'job:' || t.name || g, t.name || g, t.name || g,
			'unknown', $1::timestamptz, $1::timestamptz, ''
		 FROM tenants t, generate_series(1, $2::int) g WHERE t.name = $3`,
		`INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
			prompt_version, model_profile, status, operation_id, run_after, max_attempts, deadline, created_at, updated_at,
			error_code)
		 SELECT gen_random_uuid(), o.tenant_id, o.fingerprint, 'fp', o.fingerprint, 'dh', 'summarise', 'v1', 'fast', 'unknown',
			o.id, $1::timestamptz, 3, $1::timestamptz + interval '1 day', $1::timestamptz, $1::timestamptz, 'outcome_unknown'
		 FROM operations o JOIN tenants t ON t.id = o.tenant_id WHERE t.name = $3 AND $2::int > 0`,
	} {
		if _, err := db.Pool.Exec(ctx, q, t0, n, name); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestAClaimDoesNotReadAnotherTenantsUnknownJobs is the attack of a tenant with 5,000 jobs
// whose generations are unknown and open (a provider outage, or calls the tenant makes time
// out on purpose) beside another tenant's one queued job: an unknown job waits for its
// operation's close (ops rule 5: a timeout is an unknown outcome, and the job sends nothing
// more until the close), so no claim has anything to take from it, and a claim must not
// read it. When every claim walked each unknown job and looked its operation up, one
// tenant's outage made every tenant's claims read thousands of pages.
func TestAClaimDoesNotReadAnotherTenantsUnknownJobs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	stuckJobs(t, db, "outage", 5000)
	lone := queueJobs(t, db, "lone", 1, t0.Add(time.Minute))[0]
	if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	plan, err := js.ClaimPlan(ctx, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 5,000 unknown jobs and their operations take thousands of pages; one queued job a few dozen.
	if hit := firstBuffers(t, plan); hit > 200 {
		t.Errorf("a claim beside 5,000 unknown jobs read %d pages:\n%s", hit, plan)
	}
	if strings.Contains(plan, "operations") {
		t.Errorf("a claim looks operations up:\n%s", plan)
	}
	if got := claimOne(t, js, now); got != lone {
		t.Errorf("the claim took %s, want the other tenant's queued job %s", got, lone)
	}
}

// stuckJob gives the tenant named name one job whose generation is unknown and returns the
// job's id and its operation's.
func stuckJob(t *testing.T, db *pg.DB, name string) (job, op string) {
	t.Helper()
	stuckJobs(t, db, name, 1)
	err := db.Pool.QueryRow(context.Background(), `SELECT j.id::text, j.operation_id::text FROM jobs j
		JOIN tenants t ON t.id = j.tenant_id WHERE t.name = $1`, name).Scan(&job, &op)
	if err != nil {
		t.Fatal(err)
	}
	return job, op
}

// jobStatus is the job's status as stored.
func jobStatus(t *testing.T, db *pg.DB, id string) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// closeBy closes an operation the way one path of Settle does, through the ledger on the
// store's one close statement.
type closeBy func(t *testing.T, db *pg.DB, l *ops.Ledger, op *ops.Operation) error

var closePaths = map[string]closeBy{
	"a person's close as failed": func(t *testing.T, _ *pg.DB, l *ops.Ledger, op *ops.Operation) error {
		_, err := l.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
			Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "the provider's console shows no generation"}, Actor: "oncall@test"})
		return err
	},
	"a close as succeeded with the completion a lookup found": func(t *testing.T, _ *pg.DB, l *ops.Ledger, op *ops.Operation) error {
		_, err := l.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
			Evidence: ops.Evidence{Kind: ops.EvidenceProviderResponse, ProviderRef: "chatcmpl-1", Summary: "stored completion"},
			Result:   &ops.Result{ProviderRef: "chatcmpl-1", Body: json.RawMessage(`{"id":"chatcmpl-1"}`)}, Actor: "lookup"})
		return err
	},
	"a second person's approval of a proposed close": func(t *testing.T, db *pg.DB, l *ops.Ledger, op *ops.Operation) error {
		var pid int64
		if err := db.Pool.QueryRow(context.Background(), `INSERT INTO close_proposals (operation_id, tenant_id, kind, to_status, note,
			proposed_by, proposed_at, expires_at) VALUES ($1, $2, 'manual', 'failed', 'no generation', 'first@test', $3, $3::timestamptz + interval '1 day')
			RETURNING id`, op.ID, op.TenantID, t0).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		_, err := l.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
			Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "no generation"}, Actor: "first@test",
			Approval: &ops.Approval{ProposalID: pid, ProposedBy: "first@test", ApprovedBy: "second@test", ProposerID: 1, ApproverID: 2}})
		return err
	},
	"the reaper's expiry, then a close": func(t *testing.T, db *pg.DB, l *ops.Ledger, op *ops.Operation) error {
		ctx := context.Background()
		if _, err := db.Pool.Exec(ctx, `UPDATE operations SET retry_until = $2 WHERE id = $1`, op.ID, t0); err != nil {
			t.Fatal(err)
		}
		if n, err := db.ExpireDue(ctx, "reaper", t0.Add(time.Hour), 10); err != nil || n != 1 {
			t.Fatalf("expired %d, %v", n, err)
		}
		var job string
		if err := db.Pool.QueryRow(ctx, `SELECT id::text FROM jobs WHERE operation_id = $1`, op.ID).Scan(&job); err != nil {
			t.Fatal(err)
		}
		if s := jobStatus(t, db, job); s != "unknown" {
			t.Errorf("an expired operation, still open, made its job %s", s)
		}
		expired, err := db.Get(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Close(ctx, ops.CloseParams{ID: op.ID, Version: expired.Version, To: ops.StatusFailed,
			Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "past the key's retention, nothing found"}, Actor: "reaper"})
		return err
	},
}

// TestEveryCloseOfAnUnknownGenerationQueuesItsJob closes the operation of an unknown job on
// each path a close takes: the job is queued again in the close's own transaction (ops rule
// 6: a close and what it writes commit together), so the next claim takes it at its tenant's
// turn, and no claim has to read unknown jobs to find it. While the operation is open, even
// expired, the job stays unknown and no claim takes it (ops rule 5: an unknown outcome sends
// nothing more until it is settled).
func TestEveryCloseOfAnUnknownGenerationQueuesItsJob(t *testing.T) {
	t.Parallel()
	for name, close := range closePaths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			js := jobstore.New(db)
			ctx := context.Background()
			job, opID := stuckJob(t, db, "stuck")
			now := t0.Add(2 * time.Hour)
			if got, err := js.ClaimJobs(ctx, "w", now, now.Add(time.Hour), 5); err != nil || len(got) != 0 {
				t.Fatalf("before the close a claim took %d jobs, %v", len(got), err)
			}
			op, err := db.Get(ctx, opID)
			if err != nil {
				t.Fatal(err)
			}
			if err := close(t, db, jobs.NewLedger(db, ops.NewManualClock(t0.Add(time.Hour)), time.Minute, false), op); err != nil {
				t.Fatal(err)
			}
			if s := jobStatus(t, db, job); s != string(jobs.StatusQueued) {
				t.Fatalf("after the close the job is %s, want queued", s)
			}
			if got := claimOne(t, js, now); got != job {
				t.Errorf("the claim after the close took %s, want the job %s", got, job)
			}
		})
	}
}

// runningJob gives the tenant named name one job a worker "w" holds, and an llm_job
// operation whose outcome is unknown, not yet the job's: the moment before the worker,
// having read the operation unknown, makes the job unknown.
func runningJob(t *testing.T, db *pg.DB, name string) (job, op string) {
	t.Helper()
	ctx := context.Background()
	job = queueJobs(t, db, name, 1, t0)[0]
	if err := db.Pool.QueryRow(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
			status, created_at, updated_at, closed_by)
		SELECT gen_random_uuid(), j.tenant_id, 'llm_job', 'openai', 'job:' || j.dedup_key, j.id::text, j.dedup_key,
			'unknown', $2::timestamptz, $2::timestamptz, ''
		FROM jobs j WHERE j.id = $1 RETURNING id::text`, job, t0).Scan(&op); err != nil {
		t.Fatal(err)
	}
	if got := claimOne(t, jobstore.New(db), t0.Add(time.Minute)); got != job {
		t.Fatalf("claimed %s, want %s", got, job)
	}
	return job, op
}

// makeUnknown is the worker's change of the job to unknown after it read op as unknown.
func makeUnknown(js *jobstore.Store, job, op string) (*jobs.Job, error) {
	return js.ChangeJob(context.Background(), jobs.JobChange{ID: job, Owner: "w", Now: t0.Add(2 * time.Minute),
		Status: jobs.StatusUnknown, OperationID: op, ErrorCode: "outcome_unknown", ErrorMessage: "unknown"})
}

// waitForALockWait returns once a statement of db's database waits for a lock.
func waitForALockWait(t *testing.T, db *pg.DB) {
	t.Helper()
	for range 500 {
		var n int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no statement waits for a lock")
}

// TestAJobMadeUnknownWhileItsOperationClosesIsQueued races the worker that makes a job
// unknown with a close of its operation that has changed the operation's row but not yet
// committed: the close's transaction found the job running and queued nothing, so the
// worker's change waits for the close and queues the job itself, instead of leaving it
// unknown beside a closed operation, where no claim would ever find it (ops rule 6: what a
// close brings about is not lost to a race with it).
func TestAJobMadeUnknownWhileItsOperationClosesIsQueued(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	job, op := runningJob(t, db, "racing")
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE operations SET status = 'failed', version = version + 1, closed_at = $2, closed_by = 'oncall@test'
		WHERE id = $1`, op, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		j, err := makeUnknown(js, job, op)
		if err == nil && j.Status != jobs.StatusQueued {
			err = fmt.Errorf("the change made the job %s beside its closed operation, want queued", j.Status)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the change did not wait for the close: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := claimOne(t, js, t0.Add(time.Hour)); got != job {
		t.Errorf("the claim took %s, want the job %s", got, job)
	}
}

// TestACloseThatWaitedForTheOperationsRowQueuesTheJob races the other way: the worker's
// change holds the operation's row (as it does while it makes the job unknown) when the
// close comes, so the close waits, with a snapshot taken before the job became unknown. It
// still queues the job: the trigger that does it reads afresh once the close holds the row
// (ops rule 6: what a close brings about commits with it).
func TestACloseThatWaitedForTheOperationsRowQueuesTheJob(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	job, opID := runningJob(t, db, "racing")
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM operations WHERE id = $1 FOR SHARE`, opID); err != nil {
		t.Fatal(err)
	}
	op, err := db.Get(ctx, opID)
	if err != nil {
		t.Fatal(err)
	}
	l := jobs.NewLedger(db, ops.NewManualClock(t0.Add(time.Hour)), time.Minute, false)
	done := make(chan error, 1)
	go func() {
		done <- closePaths["a person's close as failed"](t, db, l, op)
	}()
	waitForALockWait(t, db)
	if j, err := makeUnknown(js, job, opID); err != nil || j.Status != jobs.StatusUnknown {
		t.Fatalf("the change beside an open operation: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := jobStatus(t, db, job); s != string(jobs.StatusQueued) {
		t.Errorf("after the close the job is %s, want queued", s)
	}
}
