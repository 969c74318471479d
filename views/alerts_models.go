package views

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
