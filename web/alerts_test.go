package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/web"
)

type alertsEnv struct {
	*env
	ev    *alerts.Evaluator
	clock *ops.ManualClock
}

func newAlertsEnv(t *testing.T, receivers []alerts.Receiver) *alertsEnv {
	t.Helper()
	s, tw := newServer(t)
	db := tw.DB
	clock := s.Clock.(*ops.ManualClock)
	as := alertstore.New(db)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: clock,
		Receivers: alerts.Infos(receivers)}
	s.AlertsDeps = web.AlertsDeps{AlertRules: ev.Rules, Alerts: as, AlertTest: ev}
	for _, r := range receivers {
		s.AlertReceivers = append(s.AlertReceivers, r.Name)
	}
	return &alertsEnv{env: start(t, tw, s.Handler()), ev: ev, clock: clock}
}

// unknownOps records n refunds whose outcome is unknown, created at 'at'.
func (e *alertsEnv) unknownOps(t *testing.T, n int, at time.Time) {
	t.Helper()
	var tenant int64
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	for range n {
		id := ops.NewOperationID()
		e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, created_at, updated_at)
VALUES ($1, $2, 'refund', 'stripe', $4, 'k_' || $4, 'fp', 'unknown', $3, $3)`, id, tenant, at, id)
	}
}

func TestAlertsPageShowsRulesStatesAndHistory(t *testing.T) {
	t.Parallel()
	e := newAlertsEnv(t, nil)
	c := signIn(t, e.env, "oncall@example.com", desk.RoleOncall)

	// Before any evaluation nothing reads as OK.
	_, body := e.get(t, c, "/alerts")
	if !strings.Contains(body, `data-health="unknown"`) || strings.Contains(body, `data-health="ok"`) {
		t.Fatalf("before evaluation the page shows health as known:\n%s", body)
	}
	e.unknownOps(t, 2, t0.Add(-5*time.Hour))
	if _, err := e.ev.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, body := e.get(t, c, "/alerts")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /alerts = %d", resp.StatusCode)
	}
	for _, want := range []string{
		// The oldest unknown is 5h old, over the 4h threshold, and waits out its 'for'.
		`data-rule="settle-backlog/UnknownTooOld{severity=&#34;page&#34;}" data-state="pending" data-health="ok"`,
		// Two unknowns are under the backlog threshold of 25.
		`data-rule="settle-backlog/UnknownBacklogHigh{severity=&#34;ticket&#34;}" data-state="inactive" data-health="ok"`,
		// No requests at all: no data, shown as such.
		`data-rule="settle-rates/TimeoutRateHigh{severity=&#34;page&#34;}" data-state="inactive" data-health="no_data"`,
		"kind=refund, severity=page, tenant=shop", "5h", "&gt; 4h",
		`data-testid="alerts-history-row"`, "inactive → pending",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, `data-testid="alerts-test"`) {
		t.Error("an on-call engineer is offered the test button")
	}
	e.clock.Advance(5 * time.Minute)
	if _, err := e.ev.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, body := e.get(t, c, "/alerts"); !strings.Contains(body, `data-rule="settle-backlog/UnknownTooOld{severity=&#34;page&#34;}" data-state="firing"`) {
		t.Fatalf("UnknownTooOld is not firing after its 'for'")
	}
}

func TestAlertsPageNeedsOncallAndTheTestNeedsAdmin(t *testing.T) {
	t.Parallel()
	rec := alerts.Receivers("", []string{"http://127.0.0.1:1/hook"}, nil, "")
	e := newAlertsEnv(t, rec)
	if r, _ := e.get(t, signIn(t, e.env, "support@example.com", desk.RoleSupport), "/alerts"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("support GET /alerts = %d, want 403", r.StatusCode)
	}
	oncall := signIn(t, e.env, "oncall@example.com", desk.RoleOncall)
	resp, err := oncall.PostForm(e.url+"/alerts/test", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("on-call POST /alerts/test = %d, want 403", resp.StatusCode)
	}
	admin := signIn(t, e.env, "admin@example.com", desk.RoleAdmin)
	if _, body := e.get(t, admin, "/alerts"); !strings.Contains(body, `data-testid="alerts-test"`) {
		t.Fatal("an admin is not offered the test button")
	}
	resp, err = admin.PostForm(e.url+"/alerts/test", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin POST /alerts/test = %d, want a redirect", resp.StatusCode)
	}
	var n int
	if err := e.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM alert_outbox WHERE receiver = $1 AND payload->'labels'->>'alertname' = 'SettleTestNotification'`, rec[0].Name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d test notifications in the outbox (%v), want 1", n, err)
	}
	if _, body := e.get(t, admin, "/alerts"); !strings.Contains(body, "Test notification queued") {
		t.Fatal("no confirmation after the test")
	}
}
