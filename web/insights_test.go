package web_test

import (
	"context"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// newInsightsEnv serves the insights and reconciliation pages on a fresh database.
func newInsightsEnv(t *testing.T) *env {
	t.Helper()
	s, tw := newServer(t)
	s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), alertstore.New(tw.DB)
	return start(t, tw, s.Handler())
}

func TestInsightsPageNeedsManager(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	for role, want := range map[desk.Role]int{desk.RoleSupport: http.StatusForbidden, desk.RoleOncall: http.StatusForbidden,
		desk.RoleManager: http.StatusOK, desk.RoleAdmin: http.StatusOK} {
		c := signIn(t, e, string(role)+"@example.com", role)
		r, body := e.get(t, c, "/insights")
		if r.StatusCode != want {
			t.Errorf("%s GET /insights = %d, want %d", role, r.StatusCode, want)
		}
		// The navigation offers the page to those who may open it, and only to them.
		if role == desk.RoleManager && !strings.Contains(body, `data-testid="nav-insights"`) {
			t.Errorf("no insights link for a manager")
		}
		if role == desk.RoleOncall {
			_, q := e.get(t, c, "/reconcile/exceptions")
			if strings.Contains(q, `data-testid="nav-insights"`) || !strings.Contains(q, `data-testid="nav-exceptions"`) {
				t.Errorf("on-call navigation: insights link shown or exceptions link missing")
			}
		}
	}
	if r, _ := e.get(t, client(t), "/insights"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("signed out GET /insights = %d, want a redirect to the login", r.StatusCode)
	}
}

func TestInsightsPageChartsTheRollups(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	_, tenant := seedRecon(t, e)
	// One operation left unknown for three hours, seen by the next snapshot.
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
	status, created_at, updated_at) VALUES ($1, $2, 'refund', 'stripe', 'i2', 'k2', 'fp', 500, 'usd', 'unknown', $3, $3)`,
		ops.NewOperationID(), tenant, t0.Add(-3*time.Hour))
	rollUp(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/insights?range=24h")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /insights = %d\n%s", r.StatusCode, body)
	}
	summary := func(chart string) string {
		m := regexp.MustCompile(`data-testid="chart-` + chart + `"[\s\S]*?data-testid="chart-summary"><strong>([^<]*)<`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no summary for chart %s\n%s", chart, body)
		}
		return m[1]
	}
	for chart, want := range map[string]string{
		"duplicate-rate": "66.67 % over the range (2 of 3 admitted requests).",
		"replay-rate":    "33.33 % over the range (1 of 3 admitted requests).",
		"timeout-rate":   "50 % over the range (1 of 2 attempts sent).",
		"double-charges": "1 double charge, 1 orphan charge in this range.",
		"backlog":        "1 unknown and 0 expired at 2026-03-02 09:00 UTC.",
		"backlog-age":    "The oldest unknown operation was 3h0m0s old at the last snapshot.",
		"money-usd":      "Refunds: saved 38.00 USD, lost to double charges 38.00 USD.",
	} {
		if got := summary(chart); got != want {
			t.Errorf("%s: %q, want %q", chart, got, want)
		}
	}
	if n := strings.Count(body, `data-testid="chart-svg"`); n != 7 {
		t.Errorf("%d charts drawn, want 7", n)
	}
	if !strings.Contains(body, `data-testid="insights-freshness">Counted up to 2026-03-02 09:00:00 UTC (0s ago).<`) {
		t.Errorf("freshness missing\n%s", body)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "http://") && strings.Contains(body, "cdn") {
		t.Error("the charts load something")
	}
	for _, path := range []string{"/insights?range=7d", "/insights?range=30d", "/insights?range=7d&tenant=shop&kind=refund&provider=stripe"} {
		if r, body := e.get(t, c, path); r.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="chart-double-charges"`) {
			t.Errorf("GET %s = %d", path, r.StatusCode)
		}
	}
	for _, bad := range []string{"/insights?range=1y", "/insights?tenant=nope", "/insights?kind=car"} {
		if r, _ := e.get(t, c, bad); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("GET %s = %d, want 422", bad, r.StatusCode)
		}
	}
}

// Before the rollup job has run, the pages say so rather than show zeros as facts.
func TestInsightsPageSaysWhenNothingIsCounted(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	for _, path := range []string{"/insights", "/reconcile"} {
		r, body := e.get(t, c, path)
		if r.StatusCode != http.StatusOK || !strings.Contains(body, "The rollup job has not run yet") {
			t.Errorf("GET %s = %d without the notice\n%s", path, r.StatusCode, body)
		}
	}
}

// LLM money sits beside the refunds' in its currency: a generation's cost saved by each
// replay of its key, and lost by a double generation that reconciliation recorded as a
// double-charge exception.
func TestInsightsShowLLMMoneyBesideRefunds(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	_, tenant := seedRecon(t, e)
	// Within the rollup's overlap, so the second roll-up below counts them.
	at := t0.Add(-recon.DefaultRollupOverlap)
	opID := ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, provider_ref,
	cost_micros, created_at, updated_at, closed_at, closed_by)
VALUES ($1, $2, 'llm_call', 'openai', 'key-1', 'settle_llm', 'fp', 'succeeded', 'chatcmpl-1', 20000, $3, $3, $3, 'w1')`, opID, tenant, at)
	e.exec(t, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
VALUES ($1, 'openai', 'chatcmpl-1', $2, 0, '', 'succeeded', $3, $3)`, tenant, opID, at)
	for i, answer := range []string{"new", "replayed", "replayed"} {
		e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'llm_call', $3, $4, $5, $6)`, tenant, opID, "req-"+answer+strconv.Itoa(i), i > 0, answer, at.Add(time.Duration(i)*10*time.Second))
	}
	if _, _, err := reconstore.New(e.db).RecordFinding(context.Background(), recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "openai", Ref: opID,
		TenantID: tenant, OperationID: opID, ChargeRefs: []string{"chatcmpl-1", "chatcmpl-2"}, Summary: "Generated twice.",
		Actor: "reconciler:openai", At: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rollUp(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/insights?range=24h")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /insights = %d\n%s", r.StatusCode, body)
	}
	m := regexp.MustCompile(`data-testid="chart-money-usd"[\s\S]*?data-testid="chart-summary"><strong>([^<]*)<`).FindStringSubmatch(body)
	want := "Refunds: saved 38.00 USD, lost to double charges 38.00 USD. LLM: saved 0.04 USD, lost to double billing 0.02 USD."
	if m == nil || m[1] != want {
		t.Fatalf("money summary %q, want %q", m, want)
	}
	for _, series := range []string{"Refunds saved by replays", "Refunds lost to double charges", "LLM saved by replays", "LLM lost to double billing"} {
		if !strings.Contains(body, series) {
			t.Errorf("no series %q", series)
		}
	}
}
