package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/web"
)

// AlertsConfig is how alerts are evaluated and where they go.
type AlertsConfig struct {
	// RulesPath is SETTLE_ALERT_RULES; empty means the built-in rules. Rules is the parsed
	// file, read while the configuration loads so a malformed file stops the start.
	RulesPath string
	Rules     *alerts.RuleSet
	// AlertmanagerURL is SETTLE_ALERTMANAGER_URL, Alertmanager's base URL.
	AlertmanagerURL string
	// WebhookURLs is SETTLE_ALERT_WEBHOOK_URLS, comma-separated: each gets the
	// Alertmanager webhook payload (version 4).
	WebhookURLs []string
	// ExternalURL is SETTLE_EXTERNAL_URL, where people reach Settle; alerts link to it.
	ExternalURL string
	// Format is the --format of 'alerts export'.
	Format string
}

// loadAlertsEnv reads the alert settings of serve, demo and 'alerts export'. The rules file
// is parsed here: a mistake in it is a configuration mistake with its file, line and reason.
func loadAlertsEnv(ac *AlertsConfig, e environ) error {
	ac.RulesPath = e.get(envAlertRules)
	rules, err := alerts.Load(ac.RulesPath)
	var pe *alerts.ParseError
	switch {
	case errors.As(err, &pe):
		return usagef("alert rules: %v", pe)
	case err != nil:
		return usagef("%s=%q cannot be read: %v", envAlertRules.Name, ac.RulesPath, errors.Unwrap(err))
	}
	ac.Rules = rules
	ac.AlertmanagerURL = strings.TrimRight(e.get(envAlertmanagerURL), "/")
	if err := checkHTTPURL(envAlertmanagerURL, ac.AlertmanagerURL); err != nil {
		return err
	}
	ac.WebhookURLs = nil
	for _, u := range strings.Split(e.get(envAlertWebhookURLs), ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if err := checkHTTPURL(envAlertWebhookURLs, u); err != nil {
			return err
		}
		ac.WebhookURLs = append(ac.WebhookURLs, u)
	}
	ac.ExternalURL = strings.TrimRight(e.get(envExternalURL), "/")
	return checkHTTPURL(envExternalURL, ac.ExternalURL)
}

// alertsExportFlags adds the flags of 'alerts export' to fs.
func alertsExportFlags(fs *flag.FlagSet, ac *AlertsConfig) {
	fs.StringVar(&ac.Format, "format", "prometheus", "output format; only prometheus")
}

// alertsExport writes the alert rules for another system: 'settle alerts export --format
// prometheus' writes a Prometheus rules file over Settle's /metrics.
func alertsExport(_ context.Context, ac AlertsConfig, stdout io.Writer) error {
	if ac.Format != "prometheus" {
		return usagef("alerts export: unknown --format %q; the only format is prometheus", ac.Format)
	}
	rules := ac.Rules
	if rules == nil {
		rules = alerts.DefaultRules()
	}
	if err := alerts.ExportPrometheus(rules, stdout); err != nil {
		return fmt.Errorf("export alert rules: %w", err)
	}
	return nil
}

// alertPublisher puts the alert dispatcher behind the outbox relay: package alerts knows
// nothing of ops, so the relay's events are unpacked here.
type alertPublisher struct{ d *alerts.Dispatcher }

func (p alertPublisher) Publish(ctx context.Context, e outbox.Event) error {
	return p.d.Deliver(ctx, e.Topic, e.EventID, e.Payload)
}

// wireAlerts starts the alert evaluator and the relay of its notifications, registers the
// ledger counters on /metrics, and gives the alerts page its dependencies. Every replica
// runs an evaluator loop; its role, a lease of SETTLE_ROLE_LEASE that its holder keeps and
// renews at every pass, lets one evaluate at a time, and stays with it until it stops or
// dies. Every replica also relays: the outbox hands each notification to one relay at a
// time.
func (p *Program) wireAlerts(ctx context.Context, ac AlertsConfig, srv *web.Server, reg prometheus.Registerer) {
	rules := ac.Rules
	if rules == nil {
		rules = alerts.DefaultRules()
	}
	receivers := alerts.Receivers(ac.AlertmanagerURL, ac.WebhookURLs, &http.Client{Timeout: 10 * time.Second}, ac.ExternalURL)
	store := alertstore.New(p.DB)
	// The evaluator's counts run in the background and rest between minutes of raw rows;
	// the pages' reads of the same store do not.
	ev := &alerts.Evaluator{Rules: rules, Source: store.Paced(rollupstore.BackgroundPause), Store: store, Clock: p.Clock, Receivers: alerts.Infos(receivers),
		Lease: p.Config.RoleLease, ExternalURL: ac.ExternalURL, Logger: p.Logger}
	p.startEvaluator(ctx, ev)
	if len(receivers) > 0 {
		relay := &outbox.Relay{Store: alertstore.Outbox{DB: p.DB}, Publisher: alertPublisher{&alerts.Dispatcher{Receivers: receivers, Logger: p.Logger}},
			Clock: p.Clock, Interval: time.Second, Logger: p.Logger}
		p.goLoop(ctx, relay.Loop("alert relay"))
	}
	reg.MustRegister(alerts.NewCollector(store, p.Clock, p.Logger))
	deps := web.AlertsDeps{AlertRules: rules, Alerts: store, AlertTest: ev}
	for _, r := range receivers {
		name := r.Name
		if r.Name != "alertmanager" {
			name = "a webhook (" + r.Name + ")"
		}
		deps.AlertReceivers = append(deps.AlertReceivers, name)
	}
	srv.AlertsDeps = deps
}
