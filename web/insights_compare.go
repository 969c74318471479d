package web

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// period is one window of the page's figures: the rollups summed, and the backlog's last
// snapshot in it.
type period struct {
	sums *insightSums
	last *recon.BacklogPoint
}

func lastSnapshot(points []recon.BacklogPoint, w recon.Window) *recon.BacklogPoint {
	var last *recon.BacklogPoint
	for i := range points {
		if p := points[i]; !p.Bucket.Before(w.From) && p.Bucket.Before(w.To) {
			last = &points[i]
		}
	}
	return last
}

// compareCharts sets each chart's headline, as counted over the range's compared hours
// (cur), against the previous period of the same length (prev), named by what ("the previous
// 7 days 9 hours"). cur ends before the range does (comparedPeriods), so each comparison
// says cur's own figure beside the previous one's.
func compareCharts(charts []views.Chart, cur, prev period, what string) {
	for i := range charts {
		c := &charts[i]
		switch {
		case c.ID == "duplicate-rate":
			c.Compare = comparePct(cur.sums.total.Duplicates, cur.sums.total.Admitted(), prev.sums.total.Duplicates,
				prev.sums.total.Admitted(), what, "admitted requests")
		case c.ID == "replay-rate":
			c.Compare = comparePct(cur.sums.total.Replays, cur.sums.total.Admitted(), prev.sums.total.Replays,
				prev.sums.total.Admitted(), what, "admitted requests")
		case c.ID == "timeout-rate":
			c.Compare = comparePct(cur.sums.total.Timeouts, cur.sums.total.AttemptsSent, prev.sums.total.Timeouts,
				prev.sums.total.AttemptsSent, what, "attempts sent")
		case c.ID == "double-charges":
			c.Compare = "Double charges " + compareCount(cur.sums.total.DoubleCharges, prev.sums.total.DoubleCharges, what) +
				"; orphan charges " + compareCount(cur.sums.total.Orphans, prev.sums.total.Orphans, what) + "."
		case c.ID == "backlog":
			c.Compare = compareBacklog(cur.last, prev.last, what)
		case c.ID == "backlog-age":
			c.Compare = compareAge(cur.last, prev.last, what)
		case strings.HasPrefix(c.ID, "money-"):
			c.Compare = compareMoney(cur.sums, prev.sums, strings.TrimPrefix(c.ID, "money-"), what)
		}
	}
}

// arrow says which way a change went.
func arrow(d float64) string {
	switch {
	case d > 0:
		return "↑"
	case d < 0:
		return "↓"
	}
	return ""
}

// comparePct is a rate's change in percentage points: "12.3 %, ↑ 4.1 pts vs the previous 7
// days 9 hours (8.2 %)".
func comparePct(num, den, pnum, pden int64, what, of string) string {
	if pden == 0 {
		return "No " + of + " in " + what + " to compare with."
	}
	prev := 100 * float64(pnum) / float64(pden)
	if den == 0 {
		return fmt.Sprintf("%s had %s %%.", capitalize(what), views.FormatValue(roundTo(prev, 2)))
	}
	cur := 100 * float64(num) / float64(den)
	d := roundTo(math.Abs(cur-prev), 1)
	if d == 0 {
		return fmt.Sprintf("No change vs %s (%s %%).", what, views.FormatValue(roundTo(prev, 2)))
	}
	return fmt.Sprintf("%s %%, %s %s pts vs %s (%s %%).", views.FormatValue(roundTo(cur, 2)), arrow(cur-prev), views.FormatValue(d), what,
		views.FormatValue(roundTo(prev, 2)))
}

// compareCount is a count's change: "2 (↑ 2 vs the previous 7 days)".
func compareCount(cur, prev int64, what string) string {
	if cur == prev {
		return fmt.Sprintf("%d (as in %s)", cur, what)
	}
	d := cur - prev
	return fmt.Sprintf("%d (%s %d vs %s)", cur, arrow(float64(d)), max(d, -d), what)
}

func compareBacklog(cur, prev *recon.BacklogPoint, what string) string {
	if cur == nil || prev == nil {
		return "No snapshot in " + what + " to compare with."
	}
	return fmt.Sprintf("Unknown %s; expired %s, against the end of %s.", compareCount(cur.Unknown, prev.Unknown, "then"),
		compareCount(cur.Expired, prev.Expired, "then"), what)
}

func compareAge(cur, prev *recon.BacklogPoint, what string) string {
	if cur == nil || prev == nil {
		return "No snapshot in " + what + " to compare with."
	}
	age := func(p *recon.BacklogPoint) time.Duration {
		if p.OldestUnknown.IsZero() {
			return 0
		}
		return p.TakenAt.Sub(p.OldestUnknown).Truncate(time.Minute)
	}
	a, b := age(cur), age(prev)
	if a == b {
		return fmt.Sprintf("As old as at the end of %s (%s).", what, b)
	}
	return fmt.Sprintf("%s %s vs the end of %s (%s).", arrow(float64(a-b)), (a - b).Abs(), what, b)
}

// compareMoney sets each family's money in one currency against the previous period, in
// that currency only: amounts of two currencies are never added or compared.
func compareMoney(cur, prev *insightSums, currency, what string) string {
	var parts []string
	// A family may have moved money in this currency in either period only: the range's
	// last part-hour is outside cur, and the previous period may hold what this one lacks.
	seen := map[moneyFamily]bool{}
	families := []moneyFamily{}
	for _, in := range []*insightSums{cur, prev} {
		for k := range in.saved {
			if k.currency == currency && !seen[k.family] {
				seen[k.family] = true
				families = append(families, k.family)
			}
		}
	}
	sort.Slice(families, func(i, j int) bool { return families[i] < families[j] })
	for _, f := range families {
		k := moneyKey{f, currency}
		parts = append(parts, fmt.Sprintf("%s: saved %s, %s %s.", familyNames[f], moneyDelta(cur.savedTotal[k], prev.savedTotal[k], currency, what),
			lostTo[f], moneyDelta(cur.lostTotal[k], prev.lostTotal[k], currency, what)))
	}
	return strings.Join(parts, " ")
}

func moneyDelta(cur, prev int64, currency, what string) string {
	if cur == prev {
		return ops.FormatMicros(cur, currency) + ", as much as in " + what
	}
	d := cur - prev
	return fmt.Sprintf("%s, %s %s vs %s (%s)", ops.FormatMicros(cur, currency), arrow(float64(d)), ops.FormatMicros(max(d, -d), currency), what,
		ops.FormatMicros(prev, currency))
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// alertCharts are the charts each alert concerns: its firings are shaded on them.
var alertCharts = map[string][]string{
	"TimeoutRateHigh":           {"timeout-rate"},
	"LLMDoubleBillingSuspected": {"timeout-rate"},
	"DuplicateRequestRateHigh":  {"duplicate-rate"},
	"DoubleChargeDetected":      {"double-charges"},
	"ProviderChargeMismatch":    {"double-charges"},
	"UnknownBacklogHigh":        {"backlog", "backlog-age"},
	"UnknownTooOld":             {"backlog", "backlog-age"},
	"ExpiredUnresolved":         {"backlog", "backlog-age"},
}

// bandCharts shades the firings of the window on the charts their alerts concern, keeping
// only those whose labels match the page's filter (a label the alert lacks matches).
func bandCharts(charts []views.Chart, firings []alerts.Firing, w recon.Window, bucket time.Duration, filter map[string]string) {
	byID := map[string]*views.Chart{}
	for i := range charts {
		byID[charts[i].ID] = &charts[i]
	}
	pos := func(t time.Time) float64 { return float64(t.Sub(w.From)) / float64(bucket) }
	for _, f := range firings {
		if !labelsMatch(f.Labels, filter) {
			continue
		}
		title := fmt.Sprintf("%s fired %s – %s UTC%s", f.Alert, f.From.Format("01-02 15:04"), f.To.Format("01-02 15:04"), labelText(f.Labels))
		for _, id := range alertCharts[f.Alert] {
			if c := byID[id]; c != nil {
				c.Bands = append(c.Bands, views.ChartBand{From: pos(f.From), To: pos(f.To), Title: title})
			}
		}
	}
}

func labelsMatch(labels, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := labels[k]; v != "" && ok && got != v {
			return false
		}
	}
	return true
}

// labelText names the tenant, kind, provider, API (of an alert that fires per API) and
// severity of a firing: " (demo, refund, stripe, page)", " (demo, llm_call, openai,
// responses, page)".
func labelText(labels map[string]string) string {
	var parts []string
	for _, k := range []string{"tenant", "kind", "provider", "api", "severity"} {
		if v := labels[k]; v != "" {
			parts = append(parts, v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
