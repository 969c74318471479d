package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// AlertsReader is what the alerts page reads from the store.
type AlertsReader interface {
	AlertInstances(ctx context.Context) ([]alerts.Instance, error)
	AlertRuleStatuses(ctx context.Context) ([]alerts.RuleStatus, error)
	AlertHistory(ctx context.Context, limit int) ([]alerts.Transition, error)
}

// AlertTester queues a test notification to every receiver.
type AlertTester interface {
	SendTest(ctx context.Context, actor string) (int, error)
}

// AlertsDeps are the dependencies of the alerts page. With Alerts nil the page is not
// mounted; with AlertTest nil there is no test button.
type AlertsDeps struct {
	AlertRules *alerts.RuleSet
	Alerts     AlertsReader
	AlertTest  AlertTester
	// AlertReceivers names where notifications go, for the page to say so.
	AlertReceivers []string
}

// alertHistoryLimit bounds the history shown on the page.
const alertHistoryLimit = 100

// mountAlerts adds the alert pages; it runs inside the session group. On-call engineers
// and above see the page; only admins send test notifications.
func (s *Server) mountAlerts(r chi.Router) {
	if s.Alerts == nil || s.AlertRules == nil {
		return
	}
	s.forRole(r, desk.RoleOncall).Get("/alerts", s.handleAlerts)
	s.forRole(r, desk.RoleAdmin).Post("/alerts/test", s.handleAlertTest)
}

// stateRank orders states from calm to loud, so a rule shows its loudest instance.
var stateRank = map[alerts.State]int{alerts.StateInactive: 0, alerts.StatePending: 1, alerts.StateRecovering: 2, alerts.StateFiring: 3}

func (s *Server) handleAlerts(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	instances, err := s.Alerts.AlertInstances(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	statuses, err := s.Alerts.AlertRuleStatuses(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	history, err := s.Alerts.AlertHistory(ctx, alertHistoryLimit)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	u := userFrom(ctx)
	m := views.AlertsPage{Viewer: viewer(u), Flash: s.popFlash(ctx).view(), Source: s.AlertRules.Source,
		CanTest: s.AlertTest != nil && len(s.AlertReceivers) > 0 && u.Role.AtLeast(desk.RoleAdmin), Receivers: s.AlertReceivers}
	byRule := map[string][]alerts.Instance{}
	for _, in := range instances {
		byRule[in.RuleKey] = append(byRule[in.RuleKey], in)
	}
	status := map[string]alerts.RuleStatus{}
	for _, st := range statuses {
		status[st.RuleKey] = st
	}
	now := s.Clock.Now()
	for _, rule := range s.AlertRules.Rules() {
		m.Rules = append(m.Rules, alertRuleRow(rule, status[rule.Key()], byRule[rule.Key()], now))
	}
	for _, h := range history {
		m.History = append(m.History, views.AlertHistoryRow{At: h.At.UTC().Format("2006-01-02 15:04:05"), Alert: h.Alert,
			Labels: instanceLabels(h.Labels), From: string(h.From), To: string(h.To), Value: formatAlertValue(alertRule(s.AlertRules, h.RuleKey), h.Value)})
	}
	s.render(w, r, http.StatusOK, views.Alerts(m))
}

func alertRule(set *alerts.RuleSet, key string) *alerts.Rule {
	for _, r := range set.Rules() {
		if r.Key() == key {
			return r
		}
	}
	return nil
}

func alertRuleRow(rule *alerts.Rule, st alerts.RuleStatus, ins []alerts.Instance, now time.Time) views.AlertRuleRow {
	row := views.AlertRuleRow{Key: rule.Key(), Group: rule.Group, Alert: rule.Alert, Expr: describeExpr(rule.Expr),
		Threshold: "> " + formatAlertValue(rule, rule.Expr.Threshold), For: alerts.FormatDuration(rule.For),
		KeepFiringFor: alerts.FormatDuration(rule.KeepFiringFor), Severity: rule.Labels["severity"],
		State: string(alerts.StateInactive), Health: string(st.Health), HealthMessage: st.Message, Value: "—", EvaluatedAt: "never"}
	if st.Health == "" {
		// Never evaluated is not OK either: say so.
		row.Health = string(alerts.HealthUnknown)
	}
	if st.HasValue {
		row.Value = formatAlertValue(rule, st.Value)
	}
	if !st.EvaluatedAt.IsZero() {
		row.EvaluatedAt = now.Sub(st.EvaluatedAt).Truncate(time.Second).String() + " ago"
	}
	sort.Slice(ins, func(i, j int) bool { return stateRank[ins[i].State] > stateRank[ins[j].State] })
	for _, in := range ins {
		if stateRank[in.State] > stateRank[alerts.State(row.State)] {
			row.State = string(in.State)
		}
		row.Instances = append(row.Instances, views.AlertInstanceRow{Labels: instanceLabels(in.Labels), State: string(in.State),
			Value: formatAlertValue(rule, in.Value), Since: in.Since.UTC().Format("2006-01-02 15:04:05") + " UTC",
			Summary: in.Annotations["summary"]})
	}
	return row
}

// instanceLabels shows the labels that tell instances apart; alertname is the row's title.
func instanceLabels(l map[string]string) string {
	var parts []string
	for k, v := range l {
		if k != "alertname" {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "(all)"
	}
	return strings.Join(parts, ", ")
}

func describeExpr(x alerts.Expr) string {
	var b strings.Builder
	switch x.Form {
	case alerts.FormRatio:
		fmt.Fprintf(&b, "%s / %s over %s", x.Numerator, x.Denominator, alerts.FormatDuration(x.Window))
		if x.ShortWindow > 0 {
			fmt.Fprintf(&b, " and %s", alerts.FormatDuration(x.ShortWindow))
		}
		if x.MinRequests > 0 {
			fmt.Fprintf(&b, ", at least %g %s", x.MinRequests, x.Denominator)
		}
	case alerts.FormAge:
		fmt.Fprintf(&b, "age of the %s", strings.ReplaceAll(string(x.Signal), "_", " "))
	default:
		fmt.Fprintf(&b, "%s", strings.ReplaceAll(string(x.Signal), "_", " "))
		if x.Window > 0 {
			fmt.Fprintf(&b, " over %s", alerts.FormatDuration(x.Window))
		}
		if x.Offset > 0 {
			fmt.Fprintf(&b, " ending %s ago", alerts.FormatDuration(x.Offset))
		}
	}
	if len(x.By) > 0 {
		fmt.Fprintf(&b, ", by %s", strings.Join(x.By, ", "))
	}
	return b.String()
}

// formatAlertValue writes a value in the rule's unit: ratios as percentages, ages as
// durations, counts as numbers.
func formatAlertValue(rule *alerts.Rule, v float64) string {
	switch {
	case rule == nil:
		return strconv.FormatFloat(v, 'g', 4, 64)
	case rule.Expr.Form == alerts.FormRatio:
		return strconv.FormatFloat(v*100, 'f', 2, 64) + "%"
	case rule.Expr.Form == alerts.FormAge:
		return alerts.FormatDuration(time.Duration(v) * time.Second)
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}

// noAlertReceiver is what a person who asks for a test notification is told when no
// receiver is configured.
const noAlertReceiver = "No receiver is configured: set SETTLE_ALERTMANAGER_URL or SETTLE_ALERT_WEBHOOK_URLS."

func (s *Server) handleAlertTest(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if s.AlertTest == nil {
		s.Error(w, r, ops.Errorf(ops.EINVALID, noAlertReceiver))
		return
	}
	n, err := s.AlertTest.SendTest(ctx, actor(r))
	switch {
	case errors.Is(err, alerts.ErrNoReceiver):
		s.putFlash(ctx, flashMsg{Kind: "error", Message: noAlertReceiver})
	case err != nil:
		s.putFlash(ctx, flashMsg{Kind: "error", Message: ops.ErrorMessage(err)})
	default:
		s.putFlash(ctx, flashMsg{Kind: "ok", Message: fmt.Sprintf("Test notification queued for %d receiver(s); it is delivered through the outbox within seconds.", n)})
	}
	http.Redirect(w, r, "/alerts", http.StatusSeeOther)
}
