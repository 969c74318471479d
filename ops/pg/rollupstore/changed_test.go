package rollupstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// At a steady rate every call of the last minute has changed (opened, its attempt
// finished), yet none of them has a counted time before the pass's fresh window, which
// recomputes their minutes anyway. The changed-minutes query finds the minute of an old
// call closed since the last pass and reads the attempts and client requests of that call
// alone: before, it fetched those of every call of the last minute.
func TestChangedMinutesReadOnlyCallsOlderThanTheFreshWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	// The last pass ended at 09:00:20: this one recomputes 08:59 on (its fresh window) and
	// looks for changes since 08:59:20 (the overlap before the last pass's end).
	st := recon.RollupState{MinutesUntil: t0.Add(20 * time.Second), ChangesUntil: t0.Add(20 * time.Second), LastRunAt: t0.Add(20 * time.Second)}
	p := recon.RollupParams{Now: t0.Add(35 * time.Second), Overlap: recon.DefaultRollupOverlap}
	from := st.MinutesUntil.Add(-p.Overlap).Truncate(time.Minute)

	// Twenty minutes of calls up to two minutes before, at twenty a second, as a running
	// ledger holds them.
	if _, err := db.Pool.Exec(ctx, `
WITH o AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_at, closed_by)
	SELECT gen_random_uuid(), $1, 'refund', 'stripe', g::text, g::text, 'fp', 'succeeded', t, t, t, 'w'
	FROM generate_series(1, 24000) g, LATERAL (SELECT $2::timestamptz - interval '2 minutes' - g * interval '50 milliseconds' AS t) s
	RETURNING id, created_at
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, answer, received_at, answered_at)
	SELECT $1, o.id, 'refund', 'r', 'new', o.created_at, o.created_at FROM o
)
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at) SELECT o.id, 1, o.id::text, 'w', o.created_at, o.created_at FROM o`,
		tenant, t0); err != nil {
		t.Fatal(err)
	}
	old := openRefund(t, db, tenant, t0.Add(-10*time.Minute))
	if _, err := db.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($1, 'w', 'succeeded', 'operation', $2)`,
		t0.Add(30*time.Second), old); err != nil {
		t.Fatal(err)
	}
	const recent = 300
	for i := range recent {
		openRefund(t, db, tenant, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE attempts SET finished_at = started_at + interval '50 milliseconds', audit_id = 1 WHERE started_at >= $1`, t0); err != nil {
		t.Fatal(err)
	}

	if _, err := db.Pool.Exec(ctx, `ANALYZE operations, attempts, client_requests, audit_log`); err != nil {
		t.Fatal(err)
	}
	args := rollupstore.ChangedMinutesArgs(st, p, from)
	minutes, err := pgx.CollectRows(must(db.Pool.Query(ctx, rollupstore.ChangedMinutesSQL, args)), pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(-10 * time.Minute); len(minutes) != 1 || !minutes[0].Equal(want) {
		t.Fatalf("changed minutes %v, want only %s (the old call's)", minutes, want.Format(time.TimeOnly))
	}
	// Whatever way the planner joins, the operations whose attempts and client requests are
	// read are those of the CTE the times are drawn from.
	var plan []map[string]any
	if err := db.Pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+rollupstore.ChangedMinutesSQL, args).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	joined, ok := cteRows(plan[0]["Plan"].(map[string]any), "CTE old")
	if !ok || joined > 10 {
		t.Fatalf("the times were drawn from %v operations (found %v), want the old call's alone: the %d calls of the fresh window were joined",
			joined, ok, recent)
	}
}

// cteRows returns the rows the plan's CTE of that name produced.
func cteRows(node map[string]any, name string) (float64, bool) {
	if node["Subplan Name"] == name {
		return node["Actual Rows"].(float64) * node["Actual Loops"].(float64), true
	}
	kids, _ := node["Plans"].([]any)
	for _, k := range kids {
		if n, ok := cteRows(k.(map[string]any), name); ok {
			return n, true
		}
	}
	return 0, false
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A call created just before the fresh window's end of overlap can have a row stamped before
// the window: a repeat whose clock read came before the creation's commit (a wait in the
// group commit, another replica's clock), up to the overlap earlier. When the call closes
// and the repeat is answered with the replay, the next pass recomputes that earlier minute.
func TestRollupRecountsARepeatStampedBeforeItsCallsCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := overlapDB(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	created := t0.Add(-10 * time.Second)
	id := openRefund(t, db, tenant, created)
	stamped := created.Add(-55 * time.Second)
	var repeat int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at, answered_at)
	VALUES ($1, $2, 'refund', 'r', true, 'in_progress', $3, $3) RETURNING id`, tenant, id, stamped).Scan(&repeat); err != nil {
		t.Fatal(err)
	}
	clock := ops.NewManualClock(t0.Add(20 * time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := minuteCounts(t, db, stamped.Truncate(time.Minute)), [6]int64{0, 0, 1, 0, 1, 0}; got != want {
		t.Fatalf("the repeat's minute while the call is in flight: %v, want %v", got, want)
	}
	closed := clock.Now().Add(10 * time.Second)
	if _, err := db.Pool.Exec(ctx, `
WITH up AS (UPDATE operations SET status = 'succeeded', closed_at = $2, updated_at = $2 WHERE id = $1)
INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($2, 'w', 'succeeded', 'operation', $1::text)`, id, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE client_requests SET answer = 'replayed', answered_at = $2 WHERE id = $1`, repeat, closed); err != nil {
		t.Fatal(err)
	}
	clock.Advance(recon.DefaultRollupInterval)
	rep, err := roll.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.From.After(stamped) {
		t.Fatalf("the pass's fresh window starts at %s: the repeat's minute must be older for this test", rep.From.Format(time.TimeOnly))
	}
	if got, want := minuteCounts(t, db, stamped.Truncate(time.Minute)), [6]int64{0, 0, 1, 1, 0, 0}; got != want {
		t.Fatalf("the repeat's minute after the replay: %v, want %v (operations, succeeded, requests, replays, in progress, attempts)", got, want)
	}
}
