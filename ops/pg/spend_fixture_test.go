package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// spendDay is a database with two tenants, shop (a budget of 5000) and bank (none), and
// their operations around day: shop's LLM calls and job generations of the day cost 120 in
// dollars and 4000 in euros, beside a call of the day before and a refund that are not LLM
// spend of the day; bank's call of the day costs 900.
type spendDay struct {
	db         *pg.DB
	day        time.Time
	shop, bank int64
}

func newSpendDay(t *testing.T) spendDay {
	t.Helper()
	ctx := context.Background()
	s := spendDay{db: pgtest.New(t), day: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	if err := s.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name, llm_budget_micros) VALUES ('shop', 5000) RETURNING id`).Scan(&s.shop); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('bank') RETURNING id`).Scan(&s.bank); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		tenant int64
		kind   string
		cost   int64
		usage  string
		at     time.Time
	}{
		{s.shop, "llm_call", 100, `{"cost_micros": 100}`, s.day.Add(time.Hour)},
		{s.shop, "llm_job", 20, `{"currency": "usd", "cost_micros": 20}`, s.day.Add(2 * time.Hour)},
		{s.shop, "llm_call", 4000, `{"currency": "eur", "cost_micros": 4000}`, s.day.Add(time.Hour)},
		{s.shop, "llm_call", 300, `{"cost_micros": 300}`, s.day.Add(-time.Minute)},
		{s.shop, "refund", 7, `{}`, s.day.Add(time.Hour)},
		{s.bank, "llm_call", 900, `{"cost_micros": 900}`, s.day.Add(time.Hour)},
	} {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := s.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
VALUES ($1::uuid, $2, $3, 'fakellm', $1::text, $1::text, 'fp', 0, '', $4, $5::jsonb, 'succeeded', $6, $6, $6)`,
			id, o.tenant, o.kind, o.cost, o.usage, o.at); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// planOf is Postgres's plan of query with args, asked as of a table too large to scan
// whole: an empty table is scanned whole whatever its indexes.
func planOf(t *testing.T, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `RESET enable_seqscan`)
	rows, err := conn.Query(ctx, `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
