package web_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestTheExportKeepsEachCurrencysMoneyInAColumnOfItsOwn: ops rule 12 lets no answer add
// euros to dollars, and a spreadsheet sums a column only when its cells are numbers. The
// export gives money saved and lost one column per currency (saved_usd, saved_eur, ...),
// each cell a plain amount, instead of one cell of text such as "$38.00, €12.50" that a
// sum reads as nothing.
func TestTheExportKeepsEachCurrencysMoneyInAColumnOfItsOwn(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	tenant := shopTenant(t, e)
	// A refund of 12.50 EUR in the same hour as seedReconFor's 38.00 USD one, asked for again
	// and answered from what was recorded: 12.50 EUR saved beside 38.00 USD.
	at := t0.Add(-time.Hour)
	eur := ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, amount_cents,
	currency, status, provider_ref, created_at, updated_at, closed_at, closed_by)
VALUES ($1, $2, 'refund', 'stripe', '5100|1250|eur', 'settle_e', 'fp', '5100', 1250, 'eur', 'succeeded', 're_eur', $3, $3, $3, 'w1')`,
		eur, tenant, at)
	e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'refund', 'eur_0', false, 'new', $3), ($1, $2, 'refund', 'eur_1', true, 'replayed', $4)`, tenant, eur, at, at.Add(time.Minute))
	seedReconFor(t, e, tenant)
	recs, col := managersExport(t, e)
	want := map[string]float64{"saved_usd": 38, "saved_eur": 12.5, "lost_usd": 38}
	for name := range want {
		if _, ok := col[name]; !ok {
			t.Fatalf("no %s column: %v", name, recs[0])
		}
	}
	got := map[string]float64{}
	for _, rec := range recs[1:] {
		for _, name := range []string{"saved_usd", "saved_eur", "lost_usd", "lost_eur"} {
			i, ok := col[name]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil {
				t.Fatalf("%s cell %q is not a number a spreadsheet adds: %v", name, rec[i], err)
			}
			got[name] += v
		}
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s sums to %v, want %v (rows %v)", name, got[name], v, recs)
		}
	}
	if got["lost_eur"] != 0 {
		t.Errorf("lost_eur sums to %v, want 0: nothing was charged twice in euros", got["lost_eur"])
	}
}
