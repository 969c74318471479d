package pg_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// operationsSearched are the columns of operations that some statement filters, joins,
// sorts or groups on (in a WHERE, an ON, an ORDER BY, a GROUP BY or an expression grouped
// by, as the reconciliation groups prompts by the model its usage names): the planner's
// estimates for them come from their statistics, so ANALYZE keeps computing them.
var operationsSearched = []string{
	"id", "tenant_id", "kind", "provider", "intent_key", "provider_key", "order_ref", "customer_ref",
	"chat_ref", "payment_ref", "amount_cents", "currency", "status", "version", "attempts",
	"lease_owner", "lease_until", "retry_until", "retention_seconds", "provider_ref", "usage",
	"cost_micros", "created_at", "updated_at", "closed_at", "key_waits", "purged_at", "intent_seq",
	"api", "model", "stripe_account",
}

// operationsUnsearched are the columns only ever written and read back with their row: no
// plan uses their statistics, so ANALYZE skips them (migration 00079). The bodies among them
// were most of its work on operations.
var operationsUnsearched = []string{
	"request", "result", "stream_events", "fingerprint", "provider_request_id", "closed_by", "phase",
	"first_sent_at", "duplicate_requests", "store_opted_out", "followed", "retry_uncertain",
	"no_provider_key", "has_lookup",
}

// TestAnalyzeSkipsOnlyTheColumnsNoStatementSearches: every column of operations is in one of
// the two lists, so a new column is a decision; the unsearched ones have a statistics target
// of 0 and the searched ones keep theirs. A statement that starts filtering on an unsearched
// column moves it to the searched list and takes its statistics back in a migration.
func TestAnalyzeSkipsOnlyTheColumnsNoStatementSearches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rows, err := f.db.Pool.Query(context.Background(), `
SELECT attname, coalesce(attstattarget, -1)::int FROM pg_attribute
WHERE attrelid = 'operations'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var target int
		if err := rows.Scan(&name, &target); err != nil {
			t.Fatal(err)
		}
		seen++
		switch {
		case slices.Contains(operationsUnsearched, name):
			if target != 0 {
				t.Errorf("operations.%s is searched by no statement but has statistics target %d, want 0", name, target)
			}
		case slices.Contains(operationsSearched, name):
			if target == 0 {
				t.Errorf("operations.%s is searched but ANALYZE skips it (statistics target 0)", name)
			}
			if target < 0 || target > operationsStatisticsTarget {
				t.Errorf("operations.%s has statistics target %d, want at most %d: ANALYZE samples 300 rows per unit of the largest",
					name, target, operationsStatisticsTarget)
			}
		default:
			t.Errorf("operations.%s is in neither list: say whether a statement searches it", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := len(operationsSearched) + len(operationsUnsearched); seen != want {
		t.Errorf("operations has %d columns, the lists name %d", seen, want)
	}
}

// operationsStatisticsTarget is the statistics target of every searched column of
// operations (migration 00080).
const operationsStatisticsTarget = 20

// TestAnalyzeOfOperationsSamplesSixThousandRows: ANALYZE copies each sampled row whole, and
// a gateway call's row carries its bodies inline, so the sample's size is its cost. With the
// default target it sampled 30,000 rows (every row of a young table); the searched columns'
// target of 20 samples 6,000 however large the table.
func TestAnalyzeOfOperationsSamplesSixThousandRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, `
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at)
SELECT gen_random_uuid(), $1, 'llm_call', 'openai', g::text, g::text, 'fp', 'in_progress', now(), now()
FROM generate_series(1, 9000) g`, f.tenant); err != nil {
		t.Fatal(err)
	}
	cfg := f.db.Pool.Config().ConnConfig.Copy()
	var sampled []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if m := regexp.MustCompile(`(\d+) rows in sample`).FindStringSubmatch(n.Message); m != nil {
			sampled = append(sampled, m[1])
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ANALYZE VERBOSE operations`); err != nil {
		t.Fatal(err)
	}
	if len(sampled) != 1 {
		t.Fatalf("ANALYZE VERBOSE reported samples %v, want one", sampled)
	}
	if n, _ := strconv.Atoi(sampled[0]); n != 300*operationsStatisticsTarget {
		t.Fatalf("ANALYZE sampled %d of 9,000 operations, want %d", n, 300*operationsStatisticsTarget)
	}
}
