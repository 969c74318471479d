package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// chartSection is the HTML of one chart of the insights page.
func chartSection(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<section class="chart" data-testid="chart-` + regexp.QuoteMeta(id) + `">.*?</section>`).FindString(body)
	if m == "" {
		t.Fatalf("no chart %s\n%s", id, body)
	}
	return m
}

// The charts sit in a grid; every point and bar says its value on hover; an alert's firing
// is shaded on the chart it concerns; each headline is set against the previous period;
// money stays per currency.
func TestInsightsShowFiringsComparisonsAndCurrencies(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	ctx := context.Background()
	var tenant int64
	if err := e.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	// The previous 24 hours: four requests for one refund in euros, none repeated.
	prevAt := t0.Add(-26 * time.Hour)
	prevOp := ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, amount_cents,
	currency, status, provider_ref, created_at, updated_at, closed_at, closed_by)
VALUES ($1, $2, 'refund', 'stripe', 'e1|900|eur', 'settle_e', 'fp', 'e1', 900, 'eur', 'succeeded', 're_eur', $3, $3, $3, 'w1')`, prevOp, tenant, prevAt)
	for i := range 4 {
		e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'refund', $3, false, 'new', $4)`, tenant, prevOp, "prev"+strconv.Itoa(i), prevAt.Add(time.Duration(i)*time.Minute))
	}
	// This period: a refund in euros asked for twice (one replay), beside seedRecon's dollars.
	at := t0.Add(-90 * time.Minute)
	eurOp := ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, amount_cents,
	currency, status, provider_ref, created_at, updated_at, closed_at, closed_by)
VALUES ($1, $2, 'refund', 'stripe', 'e2|2500|eur', 'settle_e2', 'fp', 'e2', 2500, 'eur', 'succeeded', 're_eur2', $3, $3, $3, 'w1')`, eurOp, tenant, at)
	for i, answer := range []string{"new", "replayed"} {
		e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'refund', $3, $4, $5, $6)`, tenant, eurOp, "eur"+strconv.Itoa(i), i > 0, answer, at.Add(time.Duration(i)*time.Minute))
	}
	// TimeoutRateHigh fired for twenty minutes two hours before now, as the evaluator records it.
	for _, tr := range []struct {
		from, to string
		at       time.Duration
	}{{"inactive", "pending", -3 * time.Hour}, {"pending", "firing", -170 * time.Minute}, {"firing", "recovering", -150 * time.Minute},
		{"recovering", "inactive", -145 * time.Minute}} {
		e.exec(t, `INSERT INTO alert_history (at, rule_key, alert, instance_key, labels, from_state, to_state, value)
VALUES ($1, 'TimeoutRateHigh/0', 'TimeoutRateHigh', 'k1', '{"tenant":"shop","kind":"refund","provider":"stripe"}', $2, $3, 0.5)`,
			t0.Add(tr.at), tr.from, tr.to)
	}
	seedReconFor(t, e, tenant)

	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/insights?range=24h")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /insights = %d\n%s", r.StatusCode, body)
	}
	if !strings.Contains(body, `class="chart-grid"`) {
		t.Error("the charts are not in a grid")
	}
	if !regexp.MustCompile(`data-testid="chart-point"><title>[^<]+: Duplicates 50 %</title>`).MatchString(body) {
		t.Errorf("no point of the duplicate rate says its value on hover")
	}
	timeouts := chartSection(t, body, "timeout-rate")
	band := regexp.MustCompile(`data-testid="chart-band"><title>(TimeoutRateHigh fired 03-02 06:10 – 03-02 06:35 UTC \(shop, refund, stripe\))</title>`)
	if !band.MatchString(timeouts) {
		t.Errorf("no band for the TimeoutRateHigh firing on the timeout chart\n%s", timeouts)
	}
	if strings.Contains(chartSection(t, body, "duplicate-rate"), `data-testid="chart-band"`) {
		t.Error("the timeout alert is shaded on the duplicate chart")
	}
	compare := func(id string) string {
		m := regexp.MustCompile(`data-testid="chart-compare">([^<]*)<`).FindStringSubmatch(chartSection(t, body, id))
		if m == nil {
			t.Fatalf("chart %s has no comparison", id)
		}
		return m[1]
	}
	for id, want := range map[string]string{
		"duplicate-rate": "60 %, ↑ 60 pts vs the previous 24 hours (0 %).",
		"double-charges": "Double charges 1 (↑ 1 vs the previous 24 hours); orphan charges 1 (↑ 1 vs the previous 24 hours).",
		"money-eur": "Refunds: saved 25.00 EUR, ↑ 25.00 EUR vs the previous 24 hours (0.00 EUR), lost to double charges 0.00 EUR, " +
			"as much as in the previous 24 hours.",
	} {
		if got := compare(id); got != want {
			t.Errorf("%s compared: %q, want %q", id, got, want)
		}
	}
	// Each currency has its own chart and none names the other's: nothing is summed across.
	usd, eur := chartSection(t, body, "money-usd"), chartSection(t, body, "money-eur")
	if strings.Contains(usd, "EUR") || strings.Contains(eur, "USD") {
		t.Errorf("a money chart mixes currencies\nUSD: %s\nEUR: %s", usd, eur)
	}
	if !strings.Contains(usd, "saved 38.00 USD") || !strings.Contains(eur, "saved 25.00 EUR") {
		t.Errorf("money per currency missing\nUSD: %s\nEUR: %s", usd, eur)
	}
}

// A firing of LLMDoubleBillingSuspected, which fires per API, says on the insights chart
// which API's resends it was about.
func TestInsightsBandNamesTheAPIOfADoubleBillingFiring(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	for _, tr := range []struct {
		from, to string
		at       time.Duration
	}{{"inactive", "pending", -3 * time.Hour}, {"pending", "firing", -170 * time.Minute}, {"firing", "recovering", -150 * time.Minute},
		{"recovering", "inactive", -145 * time.Minute}} {
		e.exec(t, `INSERT INTO alert_history (at, rule_key, alert, instance_key, labels, from_state, to_state, value)
VALUES ($1, 'LLMDoubleBillingSuspected/0', 'LLMDoubleBillingSuspected', 'k1',
	'{"tenant":"shop","kind":"llm_call","provider":"openai","api":"responses","severity":"page"}', $2, $3, 0.5)`,
			t0.Add(tr.at), tr.from, tr.to)
	}
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/insights?range=24h")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /insights = %d\n%s", r.StatusCode, body)
	}
	timeouts := chartSection(t, body, "timeout-rate")
	if !strings.Contains(timeouts, `(shop, llm_call, openai, responses, page)</title>`) {
		t.Errorf("the band of the double-billing firing does not name its API\n%s", timeouts)
	}
}
