package rollupstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestLLMMoneyIsCountedInItsPriceTablesCurrency: ops rule 12 lets no answer say more than
// Settle knows, and money saved and lost never adds amounts of two currencies. An LLM call
// costs what the price table said, in that table's currency, which the call's usage record
// names: a table in euros (or one that changed from dollars to euros) makes costs in euros,
// and the table counts each call's replays saved in its own currency, live and from the
// rollups alike, never as dollars. A call whose usage names no currency costs dollars, as
// the table's default does.
func TestLLMMoneyIsCountedInItsPriceTablesCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	at := end.Add(-2 * time.Hour)
	for i, c := range []struct {
		usage string
		cost  int64
	}{{`{"currency": "eur", "cost_micros": 5000, "cost_known": true}`, 5000}, {`{"cost_micros": 7000, "cost_known": true}`, 7000}} {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
VALUES ($1, $2, 'llm_call', 'fakellm', $3, $3, 'fp', 0, '', $4, $5::jsonb, 'succeeded', $6, $6, $6)`,
			id, tenant, "intent-"+string(rune('a'+i)), c.cost, c.usage, at); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'llm_call', $3, false, 'new', $4), ($1, $2, 'llm_call', $3 || '-again', true, 'replayed', $5)`,
			tenant, id, "req-"+string(rune('a'+i)), at, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	store := rollupstore.New(db)
	f := recon.MetricsFilter{Window: recon.Window{From: end.Add(-24 * time.Hour), To: end}, Bucket: time.Hour}
	want := recon.Money{"eur": 5000, "usd": 7000}
	saved := func(rows []recon.MetricsRow) recon.Money {
		m := recon.Money{}
		for _, r := range rows {
			for c, v := range r.Saved {
				m.Add(c, v)
			}
		}
		return m
	}
	live, err := store.ReconMetrics(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved(live); !reflect.DeepEqual(got, want) {
		t.Errorf("counted live, the replays saved %v; want %v", got, want)
	}
	roll := &recon.Rollups{Store: store, Clock: ops.NewManualClock(end), MaxSpan: 7 * 24 * time.Hour}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	rolled, err := store.RollupMetrics(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved(rolled); !reflect.DeepEqual(got, want) {
		t.Errorf("read from the rollups, the replays saved %v; want %v", got, want)
	}
}
