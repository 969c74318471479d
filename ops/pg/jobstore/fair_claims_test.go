package jobstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// queueJobs inserts n queued jobs of the tenant named name through the store, a millisecond
// apart from start on, and returns their ids oldest first.
func queueJobs(t *testing.T, db *pg.DB, name string, n int, start time.Time) []string {
	t.Helper()
	ctx := context.Background()
	tn, err := db.EnsureTenant(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	js := jobstore.New(db)
	ids := make([]string, 0, n)
	for i := range n {
		at := start.Add(time.Duration(i) * time.Millisecond)
		key := fmt.Sprintf("%s-%d", name, i)
		j := &jobs.Job{ID: uuid.NewString(), TenantID: tn.ID, IdempotencyKey: key, RequestFingerprint: "fp-" + key,
			DedupKey: jobs.DedupKey(tn.ID, key, "summarise", "v1", "fast"), DocumentHash: "dh-" + key, Pipeline: "summarise",
			PromptVersion: "v1", ModelProfile: "fast", MaxAttempts: 3, Deadline: at.Add(24 * time.Hour), CreatedAt: at}
		if _, _, err := js.InsertJob(ctx, j, jobs.Checkpoint{InputHash: "in-" + key, CodeVersion: "up-1", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// claimOne has a worker claim a single job at now, as the workers do, and returns its id.
func claimOne(t *testing.T, js *jobstore.Store, now time.Time) string {
	t.Helper()
	got, err := js.ClaimJobs(context.Background(), "w", now, now.Add(time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("claim at %s took %d jobs, want 1", now.Format(time.RFC3339Nano), len(got))
	}
	return got[0].ID
}

// TestAFloodingTenantDoesNotCrowdOutAnotherTenantsJob is the attack of a tenant that queues
// a flood of pipeline jobs just before another tenant queues one: the other tenant's job is
// claimed at the next turn, not after the whole flood, whether the workers claim one job at a
// time or a batch. Claims take turns by tenant, oldest first within a tenant (docs/api.md,
// "Workers claim jobs"); no numbered rule of package ops covers the order of claims.
func TestAFloodingTenantDoesNotCrowdOutAnotherTenantsJob(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 3} {
		t.Run(fmt.Sprintf("batch of %d", batch), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			js := jobstore.New(db)
			flood := queueJobs(t, db, "flood", 60, t0)
			lone := queueJobs(t, db, "lone", 1, t0.Add(time.Minute))[0]
			now := t0.Add(time.Hour)
			got, err := js.ClaimJobs(context.Background(), "w", now, now.Add(time.Hour), batch)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, j := range got {
				ids[j.ID] = true
			}
			if batch > 1 && !ids[lone] {
				t.Errorf("a claim of %d took %d jobs without the other tenant's one", batch, len(got))
			}
			if !ids[flood[0]] {
				t.Errorf("a claim of %d did not take the flooding tenant's oldest job", batch)
			}
			if batch == 1 {
				if next := claimOne(t, js, now.Add(time.Second)); next != lone {
					t.Errorf("the second claim took %s, want the other tenant's job %s", next, lone)
				}
			}
		})
	}
}

// TestClaimsTakeTurnsByTenantOldestFirst claims one job at a time from three tenants with
// queues of different lengths: every tenant that still has a job is served once in each
// round, in the order of their last claims, and each tenant's jobs go oldest first, so no job
// waits behind another tenant's queue (docs/api.md, "Workers claim jobs"; no numbered rule of
// package ops covers the order of claims).
func TestClaimsTakeTurnsByTenantOldestFirst(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	a := queueJobs(t, db, "alpha", 4, t0)
	b := queueJobs(t, db, "bravo", 2, t0.Add(time.Minute))
	c := queueJobs(t, db, "charlie", 3, t0.Add(2*time.Minute))
	want := []string{a[0], b[0], c[0], a[1], b[1], c[1], a[2], c[2], a[3]}
	// One clock for every claim: the turns must not depend on the workers' clocks.
	now := t0.Add(time.Hour)
	for i, w := range want {
		if got := claimOne(t, js, now); got != w {
			t.Fatalf("claim %d took %s, want %s (alpha %v, bravo %v, charlie %v)", i+1, got, w, a, b, c)
		}
	}
	if left, err := js.ClaimJobs(context.Background(), "w", now, now.Add(time.Hour), 5); err != nil || len(left) != 0 {
		t.Errorf("after every job was claimed: %d more, %v", len(left), err)
	}
}

// TestAClaimDoesNotReadAFloodingTenantsQueue fills the jobs table with 200,000 jobs beside a
// few tenants with a handful: 120,000 due jobs of one tenant, 40,000 of another that wait for
// a later retry (a backoff after the provider refused them), and 40,000 published ones of a
// third. A claim finds the tenants with a job through the index of the queues and reads each
// one's oldest due jobs there, never a queue or a tenant's history as a whole, so taking
// turns (docs/api.md, "Workers claim jobs") costs the same however long a tenant's queue is,
// however much of it is not due yet, and however many jobs a tenant ran before.
func TestAClaimDoesNotReadAFloodingTenantsQueue(t *testing.T) {
	testtool.Heavy(t, "a claim's plan on 200,000 jobs")
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	queueJobs(t, db, "flood", 1, t0)
	queueJobs(t, db, "waiting", 1, t0)
	if _, err := db.EnsureTenant(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		queueJobs(t, db, fmt.Sprintf("few-%d", i), 3, t0.Add(time.Minute))
	}
	for _, q := range []string{
		bulkJobs("flood", 120000, "0 ms"),
		bulkJobs("waiting", 40000, "2 hours"),
		bulkJobs("done", 40000, ""),
		`ANALYZE jobs`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{t0}
		}
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	plan, err := js.ClaimPlan(ctx, t0.Add(time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan on jobs") || !strings.Contains(plan, "Index Scan using jobs_tenant_claimable_idx") {
		t.Errorf("a claim does not read each tenant's oldest jobs through jobs_tenant_claimable_idx:\n%s", plan)
	}
	// 200,000 jobs take thousands of pages; a claim that reads a few per tenant takes hundreds.
	if hit := firstBuffers(t, plan); hit > 1000 {
		t.Errorf("a claim read %d pages:\n%s", hit, plan)
	}
}

// bulkJobs is the statement that adds n jobs of the tenant named name straight in SQL, a
// millisecond apart, due from t0 plus after on: queued ones, or published when after is
// empty.
func bulkJobs(name string, n int, after string) string {
	status, published := "'queued'", "NULL"
	if after == "" {
		status, published, after = "'published'", "$1::timestamptz", "0 ms"
	}
	return fmt.Sprintf(`INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
			prompt_version, model_profile, status, run_after, max_attempts, deadline, created_at, updated_at, published_at)
		 SELECT gen_random_uuid(), t.id, 'bulk-' || g, 'fp', 'dk-' || g, 'dh', 'summarise', 'v1', 'fast', %s,
			$1::timestamptz + interval '%s' + g * interval '1 ms', 3, $1::timestamptz + interval '1 day',
			$1::timestamptz + g * interval '1 ms', $1::timestamptz, %s
		 FROM tenants t, generate_series(1, %d) g WHERE t.name = '%s'`, status, after, published, n, name)
}

// firstBuffers is the number of pages the plan's top node read, from the buffers or the disk.
func firstBuffers(t *testing.T, plan string) int {
	t.Helper()
	m := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("no buffers in the plan:\n%s", plan)
	}
	hit, _ := strconv.Atoi(m[1])
	read, _ := strconv.Atoi(m[2])
	return hit + read
}

// TestAClaimBesideOverlappingClaimsTakesTheTenantsNextJob holds a tenant's oldest jobs the
// way claims running at the same moment do: a claim passes over the rows they hold and takes
// the tenant's next job, instead of coming back empty and leaving its worker idle until the
// next poll while the tenant's queue waits.
func TestAClaimBesideOverlappingClaimsTakesTheTenantsNextJob(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	ids := queueJobs(t, db, "solo", 8, t0)
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT id FROM jobs WHERE id = ANY($1::uuid[]) FOR UPDATE`, ids[:4]); err != nil {
		t.Fatal(err)
	}
	if got := claimOne(t, js, t0.Add(time.Hour)); got != ids[4] {
		t.Errorf("beside four held jobs the claim took %s, want the tenant's next one %s", got, ids[4])
	}
}

// TestClaimsAtOnceTakeEveryJobOnce runs workers' claims of two jobs at a time concurrently
// over a long queue of one tenant and short ones of others: SKIP LOCKED and the claimable
// predicate checked on the locked row keep every job to one claim, and every job is claimed.
func TestClaimsAtOnceTakeEveryJobOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	all := queueJobs(t, db, "long", 40, t0)
	for _, name := range []string{"short-a", "short-b", "short-c"} {
		all = append(all, queueJobs(t, db, name, 4, t0.Add(time.Second))...)
	}
	claimed := make(chan string, 2*len(all))
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := t0.Add(time.Hour)
			for range 3 * len(all) {
				got, err := js.ClaimJobs(context.Background(), fmt.Sprintf("w%d", w), now, now.Add(time.Hour), 2)
				if err != nil {
					t.Error(err)
					return
				}
				for _, j := range got {
					claimed <- j.ID
				}
				if len(claimed) >= len(all) {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(claimed)
	seen := map[string]int{}
	for id := range claimed {
		seen[id]++
	}
	for _, id := range all {
		if seen[id] != 1 {
			t.Errorf("job %s claimed %d times", id, seen[id])
		}
	}
}

// TestAClaimDoesNotVisitTenantsWithoutJobs has 5,000 tenants with no job in any queue beside
// one with a few: taking turns (docs/api.md, "Workers claim jobs") visits only the tenants
// with a queued or running job, so a claim costs the same however many tenants the
// deployment serves.
func TestAClaimDoesNotVisitTenantsWithoutJobs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	ids := queueJobs(t, db, "busy", 3, t0)
	for _, q := range []string{`INSERT INTO tenants (name) SELECT 'idle-' || g FROM generate_series(1, 5000) g`, `ANALYZE`} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	plan, err := js.ClaimPlan(ctx, t0.Add(time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	// A visit of each tenant reads a page or two of the index; one claim reads a few dozen.
	if hit := firstBuffers(t, plan); hit > 500 {
		t.Errorf("a claim read %d pages:\n%s", hit, plan)
	}
	if got := claimOne(t, js, t0.Add(time.Hour)); got != ids[0] {
		t.Errorf("the claim took %s, want the busy tenant's oldest job %s", got, ids[0])
	}
}

// TestUnknownJobsDoNotMakeAClaimReadEveryOperation has a tenant with 3,000 jobs whose
// generation is unknown, waiting for a person, among 100,000 closed operations. Asking, for
// each unknown job a claim passed, whether its operation is among the closed ones let the
// planner read every closed operation into a hash at each claim, so each worker's poll cost
// a scan of the ledger; a claim now reads no unknown job and no operation at all. The one
// unknown job whose operation a person closes is queued by the close and claimed at its
// tenant's turn (docs/api.md, "Workers claim jobs").
func TestUnknownJobsDoNotMakeAClaimReadEveryOperation(t *testing.T) {
	testtool.Heavy(t, "a claim's plan beside 3,000 unknown jobs and 100,000 operations")
	t.Parallel()
	db := pgtest.New(t)
	js := jobstore.New(db)
	ctx := context.Background()
	busy := queueJobs(t, db, "busy", 2, t0)
	if _, err := db.EnsureTenant(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_at, closed_by)
		 SELECT gen_random_uuid(), t.id, 'llm_job', 'openai', 'job:d' || g, 'k' || g, 'd' || g,
			CASE WHEN g <= 3001 THEN 'unknown' ELSE 'succeeded' END, $1::timestamptz, $1::timestamptz,
			CASE WHEN g <= 3001 THEN NULL ELSE $1::timestamptz END, 'w'
		 FROM tenants t, generate_series(1, 100000) g WHERE t.name = 'stuck'`,
		`INSERT INTO jobs (id, tenant_id, idempotency_key, request_fingerprint, dedup_key, document_hash, pipeline,
			prompt_version, model_profile, status, operation_id, run_after, max_attempts, deadline, created_at, updated_at)
		 SELECT gen_random_uuid(), o.tenant_id, o.fingerprint, 'fp', o.fingerprint, 'dh', 'summarise', 'v1', 'fast', 'unknown',
			o.id, $1::timestamptz, 3, $1::timestamptz + interval '1 day', $1::timestamptz, $1::timestamptz
		 FROM operations o WHERE o.status = 'unknown'`,
		`UPDATE operations SET status = 'succeeded', version = version + 1, closed_at = $1, closed_by = 'oncall@test'
		 WHERE intent_key = 'job:d3001'`,
		`ANALYZE`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{t0}
		}
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now := t0.Add(time.Hour)
	plan, err := js.ClaimPlan(ctx, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "on operations") {
		t.Errorf("a claim reads operations:\n%s", plan)
	}
	var closed string
	if err := db.Pool.QueryRow(ctx, `SELECT id::text FROM jobs WHERE dedup_key = 'd3001'`).Scan(&closed); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{claimOne(t, js, now): true, claimOne(t, js, now): true}
	if !got[closed] || !got[busy[0]] {
		t.Errorf("two claims took %v, want the stuck tenant's closed job %s and the busy tenant's oldest %s", got, closed, busy[0])
	}
}
