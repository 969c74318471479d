package rollupstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestRollupReadHashesAYearOfRollups: on rollups shaped as a year of running leaves them
// (minute rows for the last five weeks, quarter hours and hours for thirteen months), the
// planner expects several times the hours a month holds, and without the read's settings it
// sorted them to group them or started parallel workers. A page's read groups by hashing, in
// one process.
func TestRollupReadHashesAYearOfRollups(t *testing.T) {
	// A plan over a year of rows is about scale: filling them is most of a quick run's time.
	testtool.Heavy(t, "a year of rollups")
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, lv := range []struct {
		width int
		days  int
	}{{60, 35}, {900, 395}, {3600, 395}} {
		if _, err := db.Pool.Exec(ctx, `
INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, operations, succeeded, failed,
	attempts, attempts_sent, charges, computed_at)
SELECT $1, s, g % 5 + 1, (ARRAY['refund', 'llm_call', 'llm_job'])[g % 3 + 1], 'stripe', 10, 10, 9, 1, 10, 10, 9, $3
FROM generate_series(date_bin(make_interval(secs => $1), $3::timestamptz - make_interval(days => $2), '2000-01-01'),
	$3::timestamptz, make_interval(secs => $1)) s, generate_series(0, 14) g`, lv.width, lv.days, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE rollups`); err != nil {
		t.Fatal(err)
	}
	to := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	f := recon.MetricsFilter{Window: recon.Window{From: to.Add(-30 * 24 * time.Hour), To: to}, Bucket: 24 * time.Hour}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, rollupstore.RollupReadSettings); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+rollupstore.RollupCountsSQL, rollupstore.RollupArgs(f))
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	p := plan.String()
	if !strings.Contains(p, "HashAggregate") || strings.Contains(p, "Sort") || strings.Contains(p, "Gather") {
		t.Errorf("30 days by day over a year of rollups, want a hash in one process:\n%s", p)
	}
	got, err := rollupstore.New(db).RollupMetrics(ctx, f)
	if err != nil || len(got) != 30*15 {
		t.Fatalf("30 days by day: %d rows (%v), want 450 (15 groups a day)", len(got), err)
	}
}
