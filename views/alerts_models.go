package views

import "github.com/a-h/templ"

// AlertsPage is the alerts page: every rule with its state, value and threshold, the
// instances that are not inactive, and the history.
type AlertsPage struct {
	Viewer Viewer
	Flash  Flash
	// Source says where the rules came from: a file or the built-in defaults.
	Source  string
	Rules   []AlertRuleRow
	History []AlertHistoryRow
	// CanTest shows the test-notification button (admins, with a receiver configured).
	CanTest bool
	// Receivers names where notifications go; empty means nowhere.
	Receivers []string
}

// AlertRuleRow is one rule and its instances.
type AlertRuleRow struct {
	Key   string
	Group string
	Alert string
	// Expr is the condition in words; Threshold and For say when it fires.
	Expr          string
	Threshold     string
	For           string
	KeepFiringFor string
	Severity      string
	// State is the worst state of the rule's instances: inactive, pending, firing or
	// recovering.
	State string
	// Health is ok, no_data, error or unknown (never evaluated); HealthMessage says why.
	Health        string
	HealthMessage string
	Value         string
	EvaluatedAt   string
	Instances     []AlertInstanceRow
}

// AlertInstanceRow is one alert instance: one label set of a rule.
type AlertInstanceRow struct {
	Labels  string
	State   string
	Value   string
	Since   string
	Summary string
}

// AlertHistoryRow is one state change.
type AlertHistoryRow struct {
	At     string
	Alert  string
	Labels string
	From   string
	To     string
	Value  string
}

// rulesTable lists every rule, each followed by its instances.
func (m AlertsPage) rulesTable() Table {
	t := Table{
		TestID: "alerts-rules",
		Class:  "alerts",
		Columns: []Column{{Label: "Alert"}, {Label: "State"}, {Label: "Value"}, {Label: "Condition"},
			{Label: "Threshold"}, {Label: "For / keep firing"}, {Label: "Evaluated"}},
	}
	for _, r := range m.Rules {
		t.Rows = append(t.Rows, TableRow{
			Attrs: templ.OrderedAttributes{dataAttr("data-testid", "alerts-rule"), dataAttr("data-rule", r.Key),
				dataAttr("data-state", r.State), dataAttr("data-health", r.Health)},
			Cells: []Cell{
				{Content: alertName(r)},
				{Content: alertState(r), Class: "wrap"},
				{Text: r.Value, TestID: "alerts-rule-value"},
				{Text: r.Expr, Class: "wrap"},
				{Text: r.Threshold},
				{Text: r.For + " / " + r.KeepFiringFor},
				{Text: r.EvaluatedAt},
			},
		})
		for _, in := range r.Instances {
			t.Rows = append(t.Rows, TableRow{
				Class: "instance",
				Attrs: templ.OrderedAttributes{dataAttr("data-testid", "alerts-instance"), dataAttr("data-state", in.State)},
				Cells: []Cell{
					{Content: code(in.Labels), Class: "wrap", Colspan: 2},
					{Text: in.Value},
					{Text: in.Summary, Class: "wrap", Colspan: 3},
					{Text: in.State + " since " + in.Since},
				},
			})
		}
	}
	return t
}

// historyTable lists the rules' changes of state.
func (m AlertsPage) historyTable() Table {
	t := Table{
		TestID:      "alerts-history",
		Columns:     []Column{{Label: "At (UTC)"}, {Label: "Alert"}, {Label: "Labels"}, {Label: "Change"}, {Label: "Value"}},
		Empty:       "No alert has changed state yet.",
		EmptyTestID: "alerts-history-empty",
	}
	for _, h := range m.History {
		t.Rows = append(t.Rows, TableRow{
			Attrs: templ.OrderedAttributes{dataAttr("data-testid", "alerts-history-row")},
			Cells: []Cell{{Text: h.At}, {Text: h.Alert}, {Content: code(h.Labels)}, {Text: h.From + " → " + h.To}, {Text: h.Value}},
		})
	}
	return t
}
