package rollupstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// auditedCalls inserts n gateway calls created evenly over [from, from+span), each with
// its client request, its attempt finished (and audited) finish after its start, and its
// charge seen then: the calls of a running gateway, each of which changes as it closes.
func auditedCalls(t *testing.T, db *pg.DB, from time.Time, span time.Duration, n int, prefix string, finish time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, request, api, cost_micros, status,
	created_at, updated_at, closed_at)
SELECT gen_random_uuid(), 1, 'llm_call', 'fakellm', $4 || g, $4 || g, 'fp',
	jsonb_build_object('body', repeat('x', 600)), 'chat.completions', 1000 + g, 'succeeded', t, t, t
FROM generate_series(0, $3::int - 1) g, LATERAL (SELECT $1::timestamptz + $2::interval * g / $3::int AS t) s
WHERE $5::interval >= '0'`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, answer, received_at, answered_at)
SELECT tenant_id, id, kind, 'new', created_at, created_at FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND intent_key LIKE $4 || '%' AND $3::int > 0
	AND $5::interval >= '0'`, `
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, audit_id)
SELECT id, 1, provider_key, 'w', created_at, created_at + $5::interval, 'ok', 1 FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND intent_key LIKE $4 || '%' AND $3::int > 0`, `
INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
SELECT tenant_id, provider, 'gen-' || id, id, 'usd', 'succeeded', created_at, created_at + $5::interval FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND intent_key LIKE $4 || '%' AND $3::int > 0`} {
		if _, err := db.Pool.Exec(ctx, q, from, span, n, prefix, finish); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// changedLedger is a ledger as a pass at 300 calls a second finds it: the last pass ended at
// t0+ended, so this one looks for changes since a minute before and recomputes t0-1m on,
// its fresh window's end of overlap at t0 (ended 58s leaves 2 s of calls created between
// the two, 20s leaves 40 s); ten minutes of closed calls before; the 75 s of calls since,
// each closed and charged since; a second of calls before that whose attempts finished and
// charges were seen since (lateCalls); and one older row of each kind of late change.
// analyzeAt is where, between the steps, the statistics are taken: after the history, after
// everything, or never.
type changedLedger struct {
	db        *pg.DB
	args      pgx.NamedArgs
	want      []time.Time // the changed minutes
	recent    float64     // operations created since the changes are looked for
	lateCalls float64     // changed operations created before that
}

func newChangedLedger(t *testing.T, analyzeAt string, ended time.Duration) changedLedger {
	t.Helper()
	db := pgtest.New(t)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	exec := acmeLedger(t, db, t0, 1)
	// Statistics change only where the test takes them.
	exec(`DO $$ DECLARE r regclass; BEGIN
	FOR r IN SELECT c.oid::regclass FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' LOOP
		EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
	END LOOP; END $$`)
	last := t0.Add(ended)
	st := recon.RollupState{MinutesUntil: last, ChangesUntil: last, LastRunAt: last}
	p := recon.RollupParams{Now: last.Add(recon.DefaultRollupInterval), Overlap: recon.DefaultRollupOverlap}
	from := st.MinutesUntil.Add(-p.Overlap).Truncate(time.Minute)
	since := st.ChangesUntil.Add(-p.Overlap)
	l := changedLedger{db: db, args: rollupstore.ChangedMinutesArgs(st, p, from), recent: 22500 + 2, lateCalls: 300 + 3}

	// Ten minutes of history at 200 calls a second, closed long before: the recent calls are
	// a small part of the table, as in a running ledger.
	auditedCalls(t, db, t0.Add(-11*time.Minute), 10*time.Minute, 120000, "h-", 50*time.Millisecond)
	if analyzeAt == "history" {
		exec(`ANALYZE`)
	}
	auditedCalls(t, db, since.Add(-time.Second), time.Second, 300, "l-", 2*time.Second)
	auditedCalls(t, db, since, 75*time.Second, 22500, "n-", 50*time.Millisecond)

	// An older call closed since, one retried since, one charged since, one found charged
	// twice since, and an orphan charge seen since: their minutes changed.
	closed := openRefund(t, db, 1, t0.Add(-10*time.Minute))
	exec(`INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($1, 'w', 'succeeded', 'operation', $2)`, last.Add(10*time.Second), closed)
	retried := openRefund(t, db, 1, t0.Add(-8*time.Minute))
	exec(`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, audit_id)
VALUES ($1::uuid, 2, $1::uuid::text || '-2', 'w', $2, $2::timestamptz + interval '1 second', 'ok', 1)`, retried, last.Add(5*time.Second))
	charged := openRefund(t, db, 1, t0.Add(-6*time.Minute))
	exec(`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
VALUES (1, 'stripe', 're_late', $1, 'usd', 'succeeded', $2, $2)`, charged, last.Add(7*time.Second))
	twice := openRefund(t, db, 1, t0.Add(-12*time.Minute))
	exec(`INSERT INTO recon_exceptions (kind, provider, ref, operation_id, severity, summary, first_seen_at, last_seen_at, updated_at)
VALUES ('double_charge', 'stripe', $1::uuid::text, $1::uuid, 'high', 's', $2, $2, $2)`, twice, last.Add(8*time.Second))
	exec(`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
VALUES (1, 'stripe', 're_orphan', NULL, 'usd', 'succeeded', $1, $2)`, t0.Add(-14*time.Minute), last.Add(9*time.Second))
	// A call created between since and the fresh window's end of overlap, with a repeat
	// stamped before the window (within the overlap of its creation): its minute changed. A
	// call created after, with a row stamped far earlier than any clock's skew: no minute of
	// it is older than the window.
	between := openRefund(t, db, 1, t0.Add(-time.Second))
	fresh := openRefund(t, db, 1, t0.Add(5*time.Second))
	for id, at := range map[string]time.Time{between: t0.Add(-60500 * time.Millisecond), fresh: t0.Add(-210 * time.Second)} {
		exec(`INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at, answered_at)
VALUES (1, $1, 'refund', 'r', true, 'in_progress', $2, $2)`, id, at)
	}
	if analyzeAt == "everything" {
		exec(`ANALYZE`)
	}
	for _, m := range []time.Duration{-14, -12, -10, -8, -6, -2} {
		l.want = append(l.want, t0.Add(m*time.Minute))
	}
	return l
}

// At 300 calls a second, nearly every operation whose rows changed since the last pass is a
// call of its last 75 s. The changed-minutes search reads those once, by a range of
// operations_created_idx, and looks up by id only the changed operations created before
// it: before, it probed operations_pkey and fetched the wide row of every changed call
// (19,476 probes in one pass of the gateway benchmark, to keep 698). And the attempts and
// client requests of the recent calls created before the fresh window's end of overlap (up
// to a minute of them, by the pass's phase) are read by a range of their times, not probed
// call by call. The same holds whether the statistics were taken after the calls, before
// them (as a steadily written table's always are) or never, and the minutes found are the
// changed ones.
func TestChangedMinutesLookUpOnlyOperationsOlderThanTheChanges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		analyzeAt string
		ended     time.Duration
	}{{"history", 58 * time.Second}, {"history", 20 * time.Second}, {"everything", 58 * time.Second},
		{"everything", 20 * time.Second}, {"never", 58 * time.Second}} {
		t.Run(fmt.Sprintf("statistics of %s, last pass at %s", c.analyzeAt, c.ended), func(t *testing.T) {
			if c.analyzeAt != "history" {
				// A running ledger's statistics are older than its calls: those cases always run.
				testtool.Heavy(t, "a ledger of 140,000 calls for each state of its statistics")
			}
			t.Parallel()
			l := newChangedLedger(t, c.analyzeAt, c.ended)
			minutes, err := pgx.CollectRows(must(l.db.Pool.Query(context.Background(), rollupstore.ChangedMinutesSQL, l.args)),
				pgx.RowTo[time.Time])
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(minutes, time.Time.Compare)
			if !slices.EqualFunc(minutes, l.want, time.Time.Equal) {
				t.Errorf("changed minutes %v, want %v", minutes, l.want)
			}
			out := explainIn(t, l.db, "4MB", rollupstore.ChangedMinutesSQL, l.args)
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal(out, &plans); err != nil {
				t.Fatal(err)
			}
			var probes, opsRead, rescans, byOperation, scanned float64
			plans[0].Plan.walk(func(n planNode) {
				if n.Index == "operations_pkey" {
					probes += n.Loops
				}
				if strings.HasPrefix(n.Rel, "attempts") || strings.HasPrefix(n.Rel, "client_requests") {
					if strings.Contains(n.Index, "operation_id") {
						byOperation += n.Loops
					}
					if n.Type == "Seq Scan" {
						scanned += n.Rows + n.Removed
					}
				}
				if n.Rel == "operations" {
					opsRead += (n.Rows + n.Removed) * n.Loops
				}
				if n.Type == "CTE Scan" && n.Loops > 1 {
					rescans += n.Loops
				}
			})
			t.Logf("%.0f probes of operations_pkey, %.0f rows of operations read, %.0f probes of attempts and client requests by operation, %.0f rows of theirs scanned, %d shared buffers",
				probes, opsRead, byOperation, scanned, plans[0].Plan.Hits+plans[0].Plan.Reads)
			// The few changed operations created before the changes are looked for, and
			// the double charge found, are looked up by id; nothing else is.
			if probes > l.lateCalls+1 {
				t.Errorf("%.0f operations looked up by id, want at most %.0f (the changed ones created before the %.0f recent calls)",
					probes, l.lateCalls+1, l.recent)
			}
			if opsRead > l.recent+l.lateCalls+1 {
				t.Errorf("%.0f rows of operations read, want at most %.0f: each recent call once, and the older changed ones",
					opsRead, l.recent+l.lateCalls+1)
			}
			// The attempts and client requests of the recent calls created before the fresh
			// window's end of overlap are read by their times, not probed call by call (on a
			// table never analyzed the planner may read the few older calls' by a scan).
			if byOperation > 2*l.lateCalls {
				t.Errorf("attempts and client requests probed by operation %.0f times, want at most %.0f",
					byOperation, 2*l.lateCalls)
			}
			if rescans > 0 {
				t.Errorf("a list of rows scanned again %.0f times", rescans)
			}
			if t.Failed() {
				t.Log(string(out))
			}
		})
	}
}
