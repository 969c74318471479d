package rollupstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// acmeLedger makes the tenant acme and the monthly partitions of the months before end in
// db, and returns what runs a statement there, failing t on an error.
func acmeLedger(t *testing.T, db *pg.DB, end time.Time, months int) func(q string, args ...any) {
	t.Helper()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO tenants (name) VALUES ('acme')`)
	exec(`SELECT settle_month_partitions($1::timestamptz - make_interval(months => $2), $1)`, end, months)
	return exec
}

// gatewayWindow fills a ledger as the gateway leaves it: a month of calls before the
// window, and n calls in the window [end-2m, end), each with its client request, its
// attempt and, for those that succeeded, its generation's charge; one call in a hundred
// was billed twice, and a few replays and retries in the window are of calls made before
// it. It returns how many charges the window's doubly billed calls have, and how many
// requests and attempts of the window belong to older calls.
func gatewayWindow(t *testing.T, db *pg.DB, end time.Time, n int) (doubled, older int) {
	t.Helper()
	ctx := context.Background()
	exec := acmeLedger(t, db, end, 2)
	for _, part := range []struct {
		from time.Time
		span time.Duration
		n    int
	}{{end.Add(-30 * 24 * time.Hour), 30*24*time.Hour - 2*time.Minute, 10 * n}, {end.Add(-2 * time.Minute), 2 * time.Minute, n}} {
		exec(`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, request, api, cost_micros, status,
	created_at, updated_at, closed_at)
SELECT gen_random_uuid(), 1, 'llm_call', 'fakellm', $1::text || g, $1::text || g, 'fp',
	jsonb_build_object('body', repeat('x', 600)), 'chat.completions', 1000 + g, 'succeeded', t, t, t
FROM generate_series(0, $3::int - 1) g, LATERAL (SELECT $1::timestamptz + $2::interval * g / $3::int AS t) s`,
			part.from, part.span, part.n)
	}
	exec(`INSERT INTO client_requests (tenant_id, operation_id, kind, answer, received_at, answered_at)
SELECT tenant_id, id, kind, 'new', created_at, created_at FROM operations`)
	exec(`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome)
SELECT id, 1, provider_key, 'w', created_at, created_at, 'ok' FROM operations`)
	exec(`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
SELECT tenant_id, provider, 'gen-' || id, id, 'usd', 'succeeded', created_at, created_at FROM operations`)
	exec(`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
SELECT tenant_id, provider, 'gen2-' || id, id, 'usd', 'succeeded', created_at, created_at FROM operations WHERE cost_micros % 100 = 0`)
	// Replays and retries in the window of five calls made before it.
	exec(`
WITH old AS (SELECT * FROM operations WHERE created_at < $1::timestamptz - interval '2 minutes' ORDER BY created_at DESC LIMIT 5), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, duplicate, answer, received_at, answered_at)
	SELECT tenant_id, id, kind, true, 'replayed', $1::timestamptz - interval '1 minute', $1::timestamptz - interval '1 minute' FROM old
)
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome)
SELECT id, 2, provider_key, 'w', $1::timestamptz - interval '1 minute', 'timeout' FROM old`, end)
	exec(`ANALYZE operations, client_requests, attempts, provider_charges`)
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM provider_charges pc JOIN operations o ON o.id = pc.operation_id
WHERE o.created_at >= $1::timestamptz - interval '2 minutes' AND o.cost_micros % 100 = 0`, end).Scan(&doubled); err != nil {
		t.Fatal(err)
	}
	return doubled, 10
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Type    string     `json:"Node Type"`
	Rel     string     `json:"Relation Name"`
	Index   string     `json:"Index Name"`
	Rows    float64    `json:"Actual Rows"`
	Loops   float64    `json:"Actual Loops"`
	Removed float64    `json:"Rows Removed by Filter"`
	Hits    int64      `json:"Shared Hit Blocks"`
	Reads   int64      `json:"Shared Read Blocks"`
	Plans   []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// The counts of a window of gateway calls read each of the window's operations twice at
// most (once for the counts of operations, requests and attempts, once with its charges),
// not once more for every client request and attempt through operations_pkey or a scan of
// every operation; the requests and attempts of older calls look theirs up one by one. And
// the charges are numbered only where a call has more than one: no sort or window function
// runs over all the window's charges. Before, a window of 2,000 calls read 8,000 rows of
// operations or more, and sorted its 2,000 charges to number them. With too little memory
// to hash the window's operations (a window of hours, on the default work_mem) the plan
// stays linear: no list of them is scanned again for each row.
func TestCountingAWindowReadsItsOperationsOnceAndSortsOnlyDoubleCharges(t *testing.T) {
	// A plan over a month of calls is about scale: filling them is most of its time.
	testtool.Heavy(t, "a month of gateway calls")
	t.Parallel()
	db := pgtest.New(t)
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const calls = 2000
	doubled, older := gatewayWindow(t, db, end, calls)
	for _, c := range []struct {
		workMem string
		f       recon.MetricsFilter
		ops     int // operations created in the window
		older   int // rows of the window whose operation is older
	}{
		{"4MB", recon.MetricsFilter{Window: recon.Window{From: end.Add(-2 * time.Minute), To: end}, Bucket: time.Minute}, calls, older},
		// Every call of the month, with too little memory to hash their ids.
		{"64kB", recon.MetricsFilter{Window: recon.Window{From: end.Add(-31 * 24 * time.Hour), To: end}, Bucket: time.Hour}, 11 * calls, 0},
	} {
		workMem, f := c.workMem, c.f
		var opsRead, sorted, rescans, buffers float64
		var explained []string
		for sql := range rollupstore.CountRawSQL {
			out := explainIn(t, db, workMem, sql, rollupstore.CountRawArgs(f))
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal(out, &plans); err != nil {
				t.Fatal(err)
			}
			buffers += float64(plans[0].Plan.Hits + plans[0].Plan.Reads)
			explained = append(explained, string(out))
			plans[0].Plan.walk(func(n planNode) {
				if n.Rel == "operations" {
					opsRead += (n.Rows + n.Removed) * n.Loops
				}
				if n.Type == "Sort" || n.Type == "Incremental Sort" || n.Type == "WindowAgg" {
					sorted = max(sorted, n.Rows*n.Loops)
				}
				if n.Type == "CTE Scan" && n.Loops > 1 {
					rescans += n.Loops
				}
			})
		}
		t.Logf("work_mem %s: %d statements, %.0f rows of operations read, at most %.0f rows sorted, %.0f shared buffers",
			workMem, len(rollupstore.CountRawSQL), opsRead, sorted, buffers)
		if limit := float64(2*c.ops + c.older); opsRead > limit {
			t.Errorf("work_mem %s: counting a window of %d calls read %.0f rows of operations, want at most %.0f", workMem, c.ops, opsRead, limit)
		}
		// With too little memory to hash the groups, grouping them sorts: that is linear too.
		if sorted > float64(doubled) && workMem == "4MB" {
			t.Errorf("work_mem %s: a sort or a window function over %.0f rows, want at most the %d charges of the calls billed twice",
				workMem, sorted, doubled)
		}
		if rescans > 0 {
			t.Errorf("work_mem %s: a list of rows scanned again %.0f times", workMem, rescans)
		}
		if t.Failed() {
			t.Log(explained)
		}
	}
}

// explainIn is EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of sql with args, run with workMem
// for sorts and hashes alike, after what countRaw runs first in its transaction.
func explainIn(t *testing.T, db *pg.DB, workMem, sql string, args any) []byte {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT set_config('work_mem', $1, true), set_config('hash_mem_multiplier', '1', true)`, workMem); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, rollupstore.NoJITSQL); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
