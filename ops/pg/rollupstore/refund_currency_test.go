package rollupstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestRefundMoneyIsCountedInItsCurrencysMinorUnit: a refund's amount is in its currency's
// minor unit, as Stripe takes it (500 is ¥500, 1500 is 1.500 KWD), and the table counts money
// in micro-units of the major unit, as LLM costs are counted; so a replayed refund of ¥500
// saved 500 JPY, not 5 JPY, live and from the rollups alike. ops rule 12: no answer says more
// than Settle knows, and an amount a hundred times too small does.
func TestRefundMoneyIsCountedInItsCurrencysMinorUnit(t *testing.T) {
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
		cents    int64
		currency string
	}{{500, "jpy"}, {1500, "kwd"}, {3800, "usd"}} {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	order_ref, amount_cents, currency, status, created_at, updated_at, closed_at)
VALUES ($1, $2, 'refund', 'stripe', $3, $3, 'fp', $3, $4, $5, 'succeeded', $6, $6, $6)`,
			id, tenant, "order-"+c.currency, c.cents, c.currency, at); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'refund', $3, false, 'new', $4), ($1, $2, 'refund', $3 || '-again', true, 'replayed', $5)`,
			tenant, id, "req-"+string(rune('a'+i)), at, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	store := rollupstore.New(db)
	f := recon.MetricsFilter{Window: recon.Window{From: end.Add(-24 * time.Hour), To: end}, Bucket: time.Hour}
	const want = "500 JPY, 1.500 KWD, 38.00 USD"
	saved := func(rows []recon.MetricsRow) string {
		m := recon.Money{}
		for _, r := range rows {
			for c, v := range r.Saved {
				m.Add(c, v)
			}
		}
		return m.String()
	}
	live, err := store.ReconMetrics(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved(live); got != want {
		t.Errorf("counted live, the replays saved %s; want %s", got, want)
	}
	roll := &recon.Rollups{Store: store, Clock: ops.NewManualClock(end), MaxSpan: 7 * 24 * time.Hour}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	rolled, err := store.RollupMetrics(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved(rolled); got != want {
		t.Errorf("read from the rollups, the replays saved %s; want %s", got, want)
	}
}
