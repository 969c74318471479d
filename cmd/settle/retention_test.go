package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// SETTLE_RETENTION defaults to 400 days, takes days, Go durations or off, and refuses, in one
// line with exit status 2, a retention shorter than what the guarantees need.
func TestRetentionIsConfigured(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for v, want := range map[string]time.Duration{"": 400 * 24 * time.Hour, "400d": 400 * 24 * time.Hour, "9600h": 9600 * time.Hour,
		"off": 0, "800h": 800 * time.Hour} {
		cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_RETENTION": v}), t.TempDir())
		if err != nil || cfg.Retention.Keep != want {
			t.Errorf("SETTLE_RETENTION=%q: keep %s, %v; want %s", v, cfg.Retention.Keep, err, want)
		}
	}
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"SETTLE_RETENTION": "soon"}, `SETTLE_RETENTION="soon" is not a duration`},
		{map[string]string{"SETTLE_RETENTION": "3d"}, "SETTLE_RETENTION=3d is shorter than 168h0m0s"},
		{map[string]string{"SETTLE_RETENTION": "7d"}, "SETTLE_RETENTION=7d is shorter than 192h0m0s (SETTLE_LLM_KEY_TTL plus SETTLE_LLM_BODY_KEEP"},
		{map[string]string{"SETTLE_RETENTION": "10d", "SETTLE_OUTBOX_KEEP": "720h"}, "shorter than 720h0m0s (SETTLE_OUTBOX_KEEP"},
	} {
		c.vars["DATABASE_URL"] = db
		for _, args := range [][]string{{"serve"}, {"retention", "run"}} {
			code, stdout, stderr := run(t, args, c.vars, "")
			if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("settle %v with %v: exit %d, stderr %q; want 2 and one line with %q", args, c.vars, code, stderr, c.want)
			}
		}
	}
	if code, _, stderr := run(t, []string{"retention", "start"}, map[string]string{"DATABASE_URL": db}, ""); code != 2 ||
		!strings.Contains(stderr, "did you mean 'retention run'?") {
		t.Errorf("settle retention start: exit %d, %q", code, stderr)
	}
}

// 'settle retention run --dry-run' counts and removes nothing; 'settle retention run' removes
// the closed operation closed long ago, keeps the open one as old, and says what it did.
func TestRetentionRunCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := connectedDatabase(t)
	old := time.Now().Add(-500 * 24 * time.Hour)
	if _, err := conn.Exec(ctx, `
WITH tn AS (INSERT INTO tenants (name) VALUES ('acme') RETURNING id)
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_at)
SELECT gen_random_uuid(), tn.id, 'refund', 'stripe', 'i' || g, 'k' || g, 'fp', s, $1, $1, CASE WHEN s = 'succeeded' THEN $1::timestamptz END
FROM tn, generate_series(1, 2) g, LATERAL (SELECT CASE WHEN g = 1 THEN 'succeeded' ELSE 'unknown' END AS s) st`, old); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	vars := map[string]string{"DATABASE_URL": url, "SETTLE_RETENTION": "400d"}
	code, stdout, stderr := run(t, []string{"retention", "run", "--dry-run"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "1 closed operations") || !strings.Contains(stdout, "would be removed") || count(`SELECT count(*) FROM operations`) != 2 {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, []string{"retention", "run"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "removed 1 operations") || !strings.Contains(stderr, "retention: done") {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := count(`SELECT count(*) FROM operations WHERE status = 'unknown'`) + count(`SELECT count(*) FROM operations`); n != 2 {
		t.Errorf("after the run: %d; want the unknown operation alone", n)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'retention.pass'`); n != 1 {
		t.Errorf("%d retention audit rows, want 1", n)
	}
}

// The reconciler reads the provider's records of the last 31 days (recon.MaxLookback) after
// an outage, and a record naming an operation Settle no longer has is raised as an orphan
// charge: money moved outside Settle. A retention shorter than that reach would make every
// record of a removed operation a false alarm and a false sentence (ops rule 12), so it is
// refused at start; and 'settle reconcile' refuses a window reaching before the retention,
// whose operations are gone.
func TestRetentionOutlastsTheReconcilersReach(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for _, args := range [][]string{{"serve"}, {"retention", "run"}} {
		code, _, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_RETENTION": "30d"}, "")
		if code != 2 || !strings.Contains(stderr, "SETTLE_RETENTION=30d is shorter than 744h0m0s") ||
			!strings.Contains(stderr, "reconciler") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("settle %v with SETTLE_RETENTION=30d: exit %d, stderr %q; want 2 and one line naming the reconciler's reach", args, code, stderr)
		}
	}
	if cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_RETENTION": "31d"}), t.TempDir()); err != nil ||
		cfg.Retention.Keep != 31*24*time.Hour {
		t.Errorf("SETTLE_RETENTION=31d: keep %s, %v; want 31 days", cfg.Retention.Keep, err)
	}
	old := time.Now().Add(-50 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, args := range [][]string{{"reconcile", "--since", "1000h"}, {"reconcile", "--from", old}} {
		code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_RETENTION": "40d"}, "")
		if code != 2 || stdout != "" || !strings.Contains(stderr, "SETTLE_RETENTION") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("settle %v with SETTLE_RETENTION=40d: exit %d, stderr %q; want 2 and one line naming SETTLE_RETENTION", args, code, stderr)
		}
	}
}

// connectedDatabase is a fresh database of the test's own, its URL, and a connection to it
// closed when the test ends.
func connectedDatabase(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := pgtest.URL(pgtest.NewDatabase(t))
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return url, conn
}

// TestRetentionRunNeedsItsSetting: 'settle retention run' from a shell without the servers'
// SETTLE_RETENTION (set in their unit file, say to off or 800d) removed every closed
// operation older than the default 400 days, for good, and said so only afterwards. Without
// the variable a pass that removes is refused in one line with exit 2 and removes nothing;
// --dry-run still counts at the default.
func TestRetentionRunNeedsItsSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := connectedDatabase(t)
	old := time.Now().Add(-500 * 24 * time.Hour)
	if _, err := conn.Exec(ctx, `
WITH tn AS (INSERT INTO tenants (name) VALUES ('acme') RETURNING id)
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at, closed_at)
SELECT gen_random_uuid(), tn.id, 'refund', 'stripe', 'i1', 'k1', 'fp', 'succeeded', $1, $1, $1 FROM tn`, old); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DATABASE_URL": url}
	args := []string{"retention", "run"}
	code, stdout, stderr := run(t, args, vars, "")
	refusedInOneLine(t, args, code, stdout, stderr, "SETTLE_RETENTION")
	var ops, passes int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM audit_log WHERE action = 'retention.pass')`).Scan(&ops, &passes); err != nil {
		t.Fatal(err)
	}
	if ops != 1 || passes != 0 {
		t.Errorf("after 'retention run' without SETTLE_RETENTION: %d operations, %d passes audited; want 1 and 0", ops, passes)
	}
	if code, stdout, stderr := run(t, []string{"retention", "run", "--dry-run"}, vars, ""); code != 0 || !strings.Contains(stdout, "would be removed") {
		t.Errorf("--dry-run without SETTLE_RETENTION: exit %d, stdout %q, stderr %q; want 0 and the counts", code, stdout, stderr)
	}
}
