package jobs_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// workerBinary is the test worker, built once for the tests of this binary.
var workerBinary = &proctest.Binary{Package: "github.com/settle-dev/settle/ops/jobs/internal/jobworker", AtExit: pgtest.AtExit}

// startWorker starts the test worker with env added to the test's environment; when the
// test ends it is asked to stop with SIGTERM, and killed 10 s later.
func startWorker(t *testing.T, bin string, env ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	p := proctest.Start(t, "worker", cmd)
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	return p
}

// TestWorkerKilledAtEachCrashPoint runs the worker as a real process, kills it with SIGKILL
// at each crash point, starts it again and checks that every job ends published exactly
// once, each receiver applies each event once, and the fake LLM billed one generation per
// dedup key except where a resend was allowed (by the policy or by a person), which the
// ledger counts as a duplicate.
func TestWorkerKilledAtEachCrashPoint(t *testing.T) {
	testtool.Heavy(t, "workers killed at each crash point")
	t.Parallel()
	bin := workerBinary.Path(t)
	cases := []struct {
		name  string
		point string
		// retry lets the worker resend after the uncertain attempt of the dead worker.
		retry bool
		// store is the worker's store mode, as SETTLE_LLM_STORE sets settle's: off keeps the
		// provider from storing completions, so nothing can be looked up.
		store string
		// resends is how many generations beyond one per dedup key are allowed.
		resends int
	}{
		// The provider stored the dead worker's generation: the worker that takes over finds
		// it before sending again, and sends nothing (ops rule 3).
		{"after_response/resend_policy", jobs.CrashAfterResponse, true, "auto", 0},
		// Nothing to look up: the policy's resend goes, counted as a possible duplicate.
		{"after_response/resend_policy/store_off", jobs.CrashAfterResponse, true, "off", 1},
		// Batch: nothing is resent, and a person's failed close keeps the dedup key
		// (ops rule 11): the two jobs of that key end failed, never generated twice.
		{"after_response/batch_policy", jobs.CrashAfterResponse, false, "auto", 0},
		{"after_result", jobs.CrashAfterResult, false, "auto", 0},
		{"after_publish", jobs.CrashAfterPublish, false, "auto", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := testworld.New(t)
			db := w.DB
			fl, base := w.LLM(fake.LLMOptions{Seed: 3, Latency: 50 * time.Millisecond})
			rcv := newReceiver(t, db, 0)
			ten := w.Tenant("crash")
			svc := w.Jobs()
			var all []*jobs.Job
			for _, s := range []struct{ key, doc string }{{"a-1", docA}, {"a-2", docA}, {"b-1", docB}} {
				got, err := svc.Submit(ctx, jobs.Submission{TenantID: ten.ID, IdempotencyKey: s.key, Document: jobs.Document{Text: s.doc},
					Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, got.Job)
			}
			env := []string{"DATABASE_URL=" + w.DatabaseURL, "SETTLE_LLM_BASE_URL=" + base, "SETTLE_LLM_API_KEY=sk-crash",
				"SETTLE_JOB_WEBHOOK_URL=" + rcv.url, "SETTLE_JOB_LEASE=1s", "JOBWORKER_LLM_STORE=" + tc.store,
				"SETTLE_JOB_RETRY_UNCERTAIN=" + map[bool]string{true: "true", false: "false"}[tc.retry]}

			// One worker in the process that dies, so the only send in flight at the kill is the
			// one at the crash point; two in the process that takes over.
			crashed := startWorker(t, bin, append(env, "SETTLE_WORKERS=1", "JOBWORKER_CRASH_POINT="+tc.point)...)
			crashed.Wait(t, 20*time.Second)
			ws, ok := crashed.Cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("worker ended with %v, not SIGKILL at %s; its log:\n%s", crashed.Cmd.ProcessState, tc.point, crashed.Out)
			}

			again := startWorker(t, bin, append(env, "SETTLE_WORKERS=2")...)
			if !tc.retry && tc.point == jobs.CrashAfterResponse {
				// Batch: the dead worker's generation may have been billed, so nothing is sent
				// again; its jobs wait in the Unknown queue until a person settles it.
				op := waitUnknown(t, db, again)
				if gens := generationsByDedup(t, db, fl.Generations()); gens[strings.TrimPrefix(op.IntentKey, "job:")] != 1 {
					t.Fatalf("batch resent an uncertain generation: %v", gens)
				}
				ledger := jobs.NewLedger(db, ops.SystemClock{}, time.Second, false)
				if _, err := ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed, Actor: "oncall@test",
					Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "no usable answer reached us; run it again"}}); err != nil {
					t.Fatal(err)
				}
			}
			held := 0 // jobs of a generation a person closed as failed: they fail, never resend
			if !tc.retry && tc.point == jobs.CrashAfterResponse {
				held = 2
			}
			waitPublished(t, db, rcv, all, held, again)

			succeeded := 0
			for _, j := range all {
				got, err := jobstore.New(db).GetJob(ctx, 0, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if held > 0 && got.Status == jobs.StatusFailed && got.ErrorCode == "generation_failed" {
					continue
				}
				succeeded++
				if got.Status != jobs.StatusPublished {
					t.Fatalf("job %s is %s (%s)", j.IdempotencyKey, got.Status, got.ErrorCode)
				}
				if n := count(t, db, `SELECT count(*) FROM job_outbox WHERE entity_id = $1 AND published_at IS NOT NULL`, j.ID); n != 1 {
					t.Fatalf("job %s published %d times", j.IdempotencyKey, n)
				}
				if _, applied := rcv.counts(j.ID); applied != 1 {
					t.Fatalf("job %s applied %d times by the receiver", j.IdempotencyKey, applied)
				}
			}
			gens := generationsByDedup(t, db, fl.Generations())
			extra := 0
			for dedup, n := range gens {
				// Every generation the provider billed is explained by an attempt the ledger
				// recorded as billed or possibly billed.
				billed := count(t, db, `SELECT count(*) FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE o.intent_key = $1 AND a.outcome IN ('ok', 'timeout')`, jobs.IntentKey(dedup))
				if billed != n {
					t.Fatalf("dedup key %s: %d generations, %d billed attempts in the ledger", dedup[:8], n, billed)
				}
				extra += n - 1
			}
			if len(gens) != 2 || extra != tc.resends {
				t.Fatalf("generations per dedup key %v, want one each plus %d allowed resend(s)", gens, tc.resends)
			}
			// The policy's resend, and only it, is counted as a possible duplicate on the job.
			if n := count(t, db, `SELECT coalesce(sum(possible_duplicates), 0)::int FROM jobs`); n != tc.resends {
				t.Fatalf("%d possible duplicates counted, want %d", n, tc.resends)
			}
			if tc.retry && tc.resends == 0 {
				// What settled the dead worker's generation is the lookup that found it.
				if n := count(t, db, `SELECT count(*) FROM evidence e JOIN operations o ON o.id = e.operation_id
WHERE o.kind = 'llm_job' AND e.kind = 'lookup'`); n != 1 {
					t.Fatalf("%d generations settled by a lookup, want 1", n)
				}
			}
			if succeeded != len(all)-held {
				t.Fatalf("%d jobs published, want %d", succeeded, len(all)-held)
			}
			if n := count(t, db, `SELECT count(*) FROM operations WHERE kind = 'llm_job' AND status = 'succeeded'`); n != 2-held/2 {
				t.Fatalf("%d succeeded generations, want one per dedup key", n)
			}
		})
	}
}

// TestWorkerRefusesUnknownCrashPoint checks the test worker's own setting: a point the
// worker does not have is refused before anything runs, not silently never reached.
func TestWorkerRefusesUnknownCrashPoint(t *testing.T) {
	t.Parallel()
	// Building the worker costs the quick loop seconds, and only the crash tests use it.
	testtool.Heavy(t, "the crash tests' worker process")
	p := startWorker(t, workerBinary.Path(t), "JOBWORKER_CRASH_POINT=before_lunch", "DATABASE_URL=postgres://127.0.0.1:1/none")
	p.Wait(t, 10*time.Second)
	if p.ExitCode() != 1 || !strings.Contains(p.Out.String(), "before_lunch") {
		t.Fatalf("worker ended with %v; its log:\n%s", p.Cmd.ProcessState, p.Out)
	}
}

func count(t *testing.T, db *pg.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUnknown waits for the generation that the dead worker left to become unknown.
func waitUnknown(t *testing.T, db *pg.DB, p *proctest.Proc) *ops.Operation {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		page, err := deskstore.New(db).ListQueue(context.Background(), desk.QueueFilter{Status: ops.StatusUnknown, Kind: ops.KindLLMJob}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Ops) == 1 && count(t, db, `SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')`) == 0 {
			return page.Ops[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no unknown generation; worker log:\n%s", p.Out)
	return nil
}

// waitPublished waits until every job is published and every event delivered.
func waitPublished(t *testing.T, db *pg.DB, rcv *receiver, all []*jobs.Job, held int, p *proctest.Proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		done := count(t, db, `SELECT count(*) FROM jobs WHERE status = 'published'`) == len(all)-held &&
			count(t, db, `SELECT count(*) FROM jobs WHERE status = 'failed'`) == held &&
			count(t, db, `SELECT count(*) FROM job_outbox WHERE published_at IS NULL`) == 0
		if done {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var states []string
	rows, _ := db.Pool.Query(context.Background(), `SELECT idempotency_key || ':' || status || ':' || error_code FROM jobs`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		states = append(states, s)
	}
	rows.Close()
	t.Fatalf("jobs not all published and delivered: %v; worker log:\n%s", states, p.Out)
}
