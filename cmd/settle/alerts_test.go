package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/web"
)

func TestMalformedAlertRulesStopTheStartWithFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	body := "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: {count: widgets, above: 1}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var ac AlertsConfig
	err := loadAlertsEnv(&ac, func(k string) string {
		if k == "SETTLE_ALERT_RULES" {
			return path
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), path+":5: ") || !strings.Contains(err.Error(), `unknown count "widgets"`) {
		t.Fatalf("error %v, want %s:5 and the reason", err, path)
	}
	if _, ok := err.(*usageError); !ok {
		t.Fatalf("error %T, want a usage error (exit status 2)", err)
	}
}

func TestAlertSettingsRefuseBadURLs(t *testing.T) {
	var ac AlertsConfig
	env := map[string]string{"SETTLE_ALERT_WEBHOOK_URLS": "https://hooks.example/a, ftp://secret@x"}
	err := loadAlertsEnv(&ac, func(k string) string { return env[k] })
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v, want a refusal that does not repeat the URL", err)
	}
	env = map[string]string{"SETTLE_ALERTMANAGER_URL": "http://am:9093/", "SETTLE_ALERT_WEBHOOK_URLS": "https://hooks.example/a, https://hooks.example/b"}
	if err := loadAlertsEnv(&ac, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if ac.AlertmanagerURL != "http://am:9093" || len(ac.WebhookURLs) != 2 || ac.Rules == nil {
		t.Fatalf("config %+v", ac)
	}
}

func TestAlertsExportWritesPrometheusRules(t *testing.T) {
	var ac AlertsConfig
	if err := loadAlertsEnv(&ac, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ac.Format = "prometheus"
	var out bytes.Buffer
	if err := alertsExport(context.Background(), ac, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "alert: DoubleChargeDetected") {
		t.Fatalf("export:\n%s", out.String())
	}
	ac.Format = "json"
	if err := alertsExport(context.Background(), ac, &out); err == nil {
		t.Fatal("accepted --format json")
	}
}

func TestWireAlertsStartsTheEvaluatorAndExportsTheCounters(t *testing.T) {
	db := pgtest.New(t)
	clock := ops.NewManualClock(time.Now())
	p := &Program{Config: Config{WorkerID: "w1"}, DB: db, Clock: clock, Logger: slog.New(slog.DiscardHandler)}
	var ac AlertsConfig
	if err := loadAlertsEnv(&ac, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	srv := &web.Server{}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	p.wireAlerts(ctx, ac, srv, reg)
	defer func() { cancel(); p.services.Wait() }()
	if srv.Alerts == nil || srv.AlertRules == nil {
		t.Fatal("the alerts page has no dependencies")
	}
	// The evaluator's first pass records every rule's health.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := alertstore.New(db).AlertRuleStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) == len(ac.Rules.Rules()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rule statuses after 10s, want %d", len(st), len(ac.Rules.Rules()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	// Answered when it arrived, as the store records a replay: a request counts once answered.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO client_requests (tenant_id, kind, duplicate, answer, received_at, answered_at)
VALUES ($1, 'refund', true, 'replayed', $2, $2)`, tenant, clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			found[mf.GetName()] += v
		}
	}
	if found["settle_metrics_source_up"] != 1 || found["settle_client_requests_total"] != 1 {
		t.Fatalf("metrics %v, want the source up and one client request counted", found)
	}
}
