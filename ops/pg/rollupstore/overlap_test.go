package rollupstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// overlapDB is a database with one tenant, for the tests of the job's overlap.
func overlapDB(t *testing.T) (*pg.DB, int64) {
	t.Helper()
	db := pgtest.New(t)
	var tenant int64
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	return db, tenant
}

// openRefund writes, as one commit, an in-progress refund created at created with its
// client request and first attempt stamped then; it returns the operation's id.
func openRefund(t *testing.T, db *pg.DB, tenant int64, created time.Time) string {
	t.Helper()
	id := ops.NewOperationID()
	if _, err := db.Pool.Exec(context.Background(), `
WITH o AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at)
	VALUES (@id::uuid, @tenant, 'refund', 'stripe', @id::text, @id::text, 'fp', 'in_progress', @at, @at)
	RETURNING id
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, answer, received_at, answered_at)
	SELECT @tenant, o.id, 'refund', 'r', 'new', @at, @at FROM o
)
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at) SELECT o.id, 1, @id::text, 'w', @at FROM o`,
		pgx.NamedArgs{"id": id, "tenant": tenant, "at": created}); err != nil {
		t.Fatal(err)
	}
	return id
}

// minuteCounts reads a minute's rollup: operations, succeeded, client requests, replays,
// answered in progress and attempts.
func minuteCounts(t *testing.T, db *pg.DB, minute time.Time) [6]int64 {
	t.Helper()
	var c [6]int64
	if err := db.Pool.QueryRow(context.Background(), `
SELECT coalesce(sum(operations), 0), coalesce(sum(succeeded), 0), coalesce(sum(client_requests), 0), coalesce(sum(replays), 0),
	coalesce(sum(answered_in_progress), 0), coalesce(sum(attempts), 0)
FROM rollups WHERE width_seconds = 60 AND start = $1`, minute).Scan(&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
		t.Fatal(err)
	}
	return c
}

// A pass that follows a pass recomputes the minutes since the last one's end less the
// overlap, and no more: at a steady rate it reads the rows of about 105 seconds, seven
// intervals' worth, where a five-minute overlap read those of 345 (23 intervals).
func TestRollupPassAfterAPassReadsOnlyTheOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	openRefund(t, db, tenant, t0.Add(-20*time.Minute))
	clock := ops.NewManualClock(t0.Add(20 * time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("first run: %+v %v", rep, err)
	}
	clock.Advance(recon.DefaultRollupInterval)
	rep, err := roll.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The last run ended at 09:00:20; less a minute's overlap, the pass starts at 08:59.
	if want := t0.Add(-time.Minute); !rep.From.Equal(want) || !rep.To.Equal(t0.Add(time.Minute)) || rep.Minutes != 2 || rep.Changed != 0 {
		t.Fatalf("second pass %+v, want minutes %s..%s only", rep, want.Format(time.TimeOnly), t0.Add(time.Minute).Format(time.TimeOnly))
	}
	if recon.DefaultRollupOverlap > time.Minute {
		t.Fatalf("overlap %s: each pass reads more than a minute before the last one's end again", recon.DefaultRollupOverlap)
	}
}

// A row stamped before the last pass's end but committed after it, within the overlap's
// bound (a statement's deadline and two replicas' skew), is counted by the next pass.
func TestRollupCountsARowCommittedAfterThePassItIsStampedIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	openRefund(t, db, tenant, t0.Add(-20*time.Minute))
	clock := ops.NewManualClock(t0.Add(50 * time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Stamped 55 s before the pass's end, in the minute before it, and committed after it.
	stamped := clock.Now().Add(-55 * time.Second)
	openRefund(t, db, tenant, stamped)
	clock.Advance(recon.DefaultRollupInterval)
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := minuteCounts(t, db, stamped.Truncate(time.Minute)), [6]int64{1, 0, 1, 0, 0, 1}; got != want {
		t.Fatalf("the late row's minute holds %v, want %v", got, want)
	}
}

// A call answered long after its minute (a ten-minute LLM call, a refund closed by the
// reconciler) is not the overlap's: its close is audited when it happens, and the pass
// that sees the audit row recomputes the minutes of the operation's creation, requests and
// attempts. The audit row is stamped before the last pass's end and committed after it, and
// a repeat's answer of replayed follows the close: both are in the next pass.
func TestRollupCountsACallClosedLongAfterItsMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	opened := t0.Add(-10 * time.Minute)
	id := openRefund(t, db, tenant, opened)
	var repeat int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at, answered_at)
	VALUES ($1, $2, 'refund', 'r', true, 'in_progress', $3, $3) RETURNING id`, tenant, id, opened.Add(time.Minute)).Scan(&repeat); err != nil {
		t.Fatal(err)
	}
	clock := ops.NewManualClock(t0.Add(20 * time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := minuteCounts(t, db, opened), [6]int64{1, 0, 1, 0, 0, 1}; got != want {
		t.Fatalf("while in flight: %v, want %v", got, want)
	}
	closed := clock.Now().Add(-50 * time.Second)
	if _, err := db.Pool.Exec(ctx, `
WITH up AS (UPDATE operations SET status = 'succeeded', closed_at = $2, updated_at = $2 WHERE id = $1)
INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($2, 'w', 'succeeded', 'operation', $1::text)`, id, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE client_requests SET answer = 'replayed', answered_at = $2 WHERE id = $1`,
		repeat, clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(recon.DefaultRollupInterval)
	rep, err := roll.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed != 2 {
		t.Fatalf("%+v: want the opening's and the repeat's minutes recomputed", rep)
	}
	if got, want := minuteCounts(t, db, opened), [6]int64{1, 1, 1, 0, 0, 1}; got != want {
		t.Fatalf("the opening's minute after the close: %v, want %v", got, want)
	}
	if got, want := minuteCounts(t, db, opened.Add(time.Minute)), [6]int64{0, 0, 1, 1, 0, 0}; got != want {
		t.Fatalf("the repeat's minute after its answer: %v, want %v", got, want)
	}
}

// At a steady rate of one operation a second, passes every interval read each operation
// 6.5 times (passes on every quarter of a minute; seven over any phase): a five-minute
// overlap read each 22.5 times.
func TestRollupPassesReadAFewIntervalsOfRowsAtASteadyRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := ops.NewManualClock(t0)
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at)
SELECT g, $1, 'refund', 'stripe', g::text, g::text, 'fp', 'in_progress', $2::timestamptz + s * interval '1 second', $2::timestamptz + s * interval '1 second'
FROM (SELECT gen_random_uuid() AS g, s FROM generate_series(-600, -1) s) r`, tenant, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	const passes = 16 // four minutes: every phase of the interval within a minute
	read := 0
	for range passes {
		last := clock.Now()
		clock.Advance(recon.DefaultRollupInterval)
		if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at)
SELECT g, $1, 'refund', 'stripe', g::text, g::text, 'fp', 'in_progress', $2::timestamptz + s * interval '1 second', $2::timestamptz + s * interval '1 second'
FROM (SELECT gen_random_uuid() AS g, s FROM generate_series(0, 14) s) r`, tenant, last); err != nil {
			t.Fatal(err)
		}
		rep, err := roll.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE created_at >= $1 AND created_at < $2`, rep.From, rep.To).Scan(&n); err != nil {
			t.Fatal(err)
		}
		read += n
	}
	arrived := passes * int(recon.DefaultRollupInterval/time.Second)
	t.Logf("%d passes read %d operations, %d arrived: %.1f times each", passes, read, arrived, float64(read)/float64(arrived))
	if read > 8*arrived {
		t.Fatalf("%d passes read %d operations for %d that arrived: more than eight times each", passes, read, arrived)
	}
}
