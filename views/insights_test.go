package views_test

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/views"
)

func f(v float64) *float64 { return &v }

func insightsPage() views.InsightsPage {
	return views.InsightsPage{
		Viewer:      views.Viewer{Email: "boss@demo.settle", Role: "manager"},
		Filter:      views.InsightsFilter{Range: "7d", Provider: "stripe"},
		Ranges:      []views.Option{{Value: "24h", Label: "Last 24 hours"}, {Value: "7d", Label: "Last 7 days", Selected: true}},
		Freshness:   "Counted up to 2026-03-02 09:00:00 UTC (3s ago).",
		BucketLabel: "hour",
		Charts: []views.Chart{
			{ID: "duplicate-rate", Title: "Duplicate request rate", Unit: "%", Summary: "25 % over the range.",
				Buckets: []string{"a", "b", "c", "d"},
				Series:  []views.ChartSeries{{Name: "Duplicates", Color: "#2563eb", Values: []*float64{f(10), nil, f(40), f(25)}}}},
			{ID: "double-charges", Title: "Double charges", Bars: true, Buckets: []string{"a", "b", "c"},
				Series: []views.ChartSeries{{Name: "Double", Color: "#dc2626", Values: []*float64{f(0), f(2), f(1)}},
					{Name: "Orphan", Color: "#7c3aed", Values: []*float64{f(1), f(0), f(0)}}}},
			{ID: "backlog", Title: "Unknown backlog", Buckets: []string{"a", "b"},
				Series: []views.ChartSeries{{Name: "Unknown", Color: "#ea580c", Values: []*float64{nil, nil}}}},
		},
	}
}

func TestInsightsDrawsLinesBarsAndGaps(t *testing.T) {
	doc := render(t, views.Insights(insightsPage()))
	if got := text(one(t, doc, "insights-freshness")); got != "Counted up to 2026-03-02 09:00:00 UTC (3s ago)." {
		t.Errorf("freshness %q", got)
	}
	if got := attr(one(t, doc, "insights-filter-provider"), "value"); got != "stripe" {
		t.Errorf("provider filter %q", got)
	}
	charts := byTestID(doc, "chart-svg")
	if len(charts) != 2 {
		t.Fatalf("%d charts drawn, want 2 (the empty one is not)", len(charts))
	}
	dup := one(t, doc, "chart-duplicate-rate")
	// The missing value splits the line: one point alone, then two joined.
	if got := len(byTestID(dup, "chart-line")); got != 2 {
		t.Errorf("%d line segments, want 2", got)
	}
	if got := len(byTestID(dup, "chart-point")); got != 3 {
		t.Errorf("%d points, want 3", got)
	}
	var ticks []string
	for _, n := range byTestID(dup, "chart-ytick") {
		ticks = append(ticks, text(n))
	}
	if strings.Join(ticks, "|") != "0 %|25 %|50 %" {
		t.Errorf("y axis %v, want a round 50 %% at the top", ticks)
	}
	if got := text(one(t, dup, "chart-summary")); got != "25 % over the range." {
		t.Errorf("summary %q", got)
	}
	rows := byTestID(dup, "chart-row")
	if len(rows) != 4 || !strings.Contains(text(rows[1]), "—") {
		t.Errorf("numbers table: %d rows, a gap shows as a dash", len(rows))
	}
	bars := byTestID(one(t, doc, "chart-double-charges"), "chart-bar")
	if len(bars) != 3 {
		t.Fatalf("%d bars, want 3 (zeros are not drawn)", len(bars))
	}
	if got := text(bars[0]); got != "b: Double 2" {
		t.Errorf("bar tooltip %q", got)
	}
	one(t, one(t, doc, "chart-backlog"), "chart-empty")
	// No script or style of its own: the page's CSP allows neither inline.
	for _, c := range charts {
		if attr(c, "style") != "" {
			t.Error("inline style on a chart")
		}
	}
}

func TestNavOffersReconciliationAndInsightsByRole(t *testing.T) {
	for role, want := range map[string][4]bool{"support": {false, false, false, false}, "oncall": {false, true, false, false},
		"manager": {true, true, true, true}, "admin": {true, true, true, true}} {
		doc := render(t, views.Layout("x", views.Viewer{Email: role + "@x", Role: role}))
		for i, id := range []string{"nav-reconcile", "nav-exceptions", "nav-insights", "nav-tenants"} {
			if got := len(byTestID(doc, id)) == 1; got != want[i] {
				t.Errorf("%s: %s shown = %v, want %v", role, id, got, want[i])
			}
		}
	}
}
