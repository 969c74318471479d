package rollupstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	// A connection of its own: a backend's statistics of this transaction include what its
	// earlier transactions did and it has not yet reported.
	conn, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	minutes, err := pgx.CollectRows(must(tx.Query(ctx, rollupstore.ChangedMinutesSQL, rollupstore.ChangedMinutesArgs(st, p, from))), pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(-10 * time.Minute); len(minutes) != 1 || !minutes[0].Equal(want) {
		t.Fatalf("changed minutes %v, want only %s (the old call's)", minutes, want.Format(time.TimeOnly))
	}
	var fetched int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(sum(coalesce(idx_tup_fetch, 0) + seq_tup_read), 0) FROM pg_stat_xact_user_tables
WHERE relname LIKE 'attempts%' OR relname LIKE 'client_requests%'`).Scan(&fetched); err != nil {
		t.Fatal(err)
	}
	// The attempts finished since 08:59:20 are read to find the changed calls (one each);
	// past those, only the old call's attempt and client request.
	if limit := int64(recent + 10); fetched > limit {
		t.Fatalf("the query fetched %d rows of attempts and client requests, want at most %d: the %d calls of the fresh window were joined",
			fetched, limit, recent)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
