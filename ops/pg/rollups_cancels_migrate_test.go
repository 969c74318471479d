package pg_test

import (
	"context"
	"testing"
	"time"
)

// TestRollupsCancelsMigrationCountsTheCancelsAlreadyRolledUp: ops rule 8 makes the duplicate
// rate a counted fact of the admitted requests, which leave out the cancels. Migration 00086
// adds the rollups' count of cancels; the rows rolled up before it are given the cancels
// their requests hold, at every width and in the group the counts put a request in (the
// operation's provider and API, none for a refused cancel), and no other row takes one.
func TestRollupsCancelsMigrationCountsTheCancelsAlreadyRolledUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := f.db.MigrateDownTo(ctx, 85); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(-time.Hour).Add(7 * time.Minute)
	var op string
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, api, intent_key, provider_key, fingerprint,
	amount_cents, currency, status, created_at, updated_at, closed_at, closed_by)
VALUES (gen_random_uuid(), $1, 'llm_call', 'openai', 'responses', 'i1', 'k1', 'fp', 0, '', 'succeeded', $2, $2, $2, 'w1') RETURNING id`,
		f.tenant, at).Scan(&op); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO client_requests (tenant_id, operation_id, kind, duplicate, answer, received_at) VALUES
	($1, $2, 'llm_call', false, 'new', $3), ($1, $2, 'llm_call', false, 'cancelled', $3), ($1, $2, 'llm_call', false, 'cancel_failed', $3),
	($1, NULL, 'llm_call', false, 'cancel_refused', $3), ($1, NULL, 'llm_call', false, 'rejected', $3)`, f.tenant, op, at)
	// The rows the rollup job wrote before the migration, at each width.
	for _, w := range []int{60, 900, 3600} {
		start := at.Truncate(time.Duration(w) * time.Second)
		exec(`INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, api, client_requests, computed_at) VALUES
	($1, $2, $3, 'llm_call', 'openai', 'responses', 3, now()), ($1, $2, $3, 'llm_call', '', '', 2, now()),
	($1, $2 - make_interval(secs => $1), $3, 'llm_call', 'openai', 'responses', 4, now())`, w, start, f.tenant)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{60, 900, 3600} {
		start := at.Truncate(time.Duration(w) * time.Second)
		for _, c := range []struct {
			provider string
			start    time.Time
			want     int
		}{{"openai", start, 2}, {"", start, 1}, {"openai", start.Add(-time.Duration(w) * time.Second), 0}} {
			if n := f.count(t, `SELECT answered_cancel FROM rollups WHERE width_seconds = $1 AND start = $2 AND tenant_id = $3 AND provider = $4`,
				w, c.start, f.tenant, c.provider); n != c.want {
				t.Errorf("width %d s, provider %q, %s: %d cancels, want %d", w, c.provider, c.start.Format("15:04"), n, c.want)
			}
		}
	}
}
