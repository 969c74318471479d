package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// InsightsReader is what the insights page needs from the store: the rollups and the
// backlog snapshots the rollup job keeps, never the raw tables.
type InsightsReader interface {
	RollupMetrics(ctx context.Context, f recon.MetricsFilter) ([]recon.MetricsRow, error)
	RollupStatus(ctx context.Context) (recon.RollupState, error)
	BacklogSeries(ctx context.Context, f recon.BacklogFilter) ([]recon.BacklogPoint, error)
}

// FiringsReader is what the insights page needs from the alerts' store.
type FiringsReader interface {
	// AlertTransitions returns the alert history of [from, to) with each instance's last
	// transition before it, oldest first: the firings shaded on the charts.
	AlertTransitions(ctx context.Context, from, to time.Time) ([]alerts.Transition, error)
}

// InsightsDeps are the dependencies of the insights page. With Insights or Firings nil the
// page is not mounted.
type InsightsDeps struct {
	Insights InsightsReader
	Firings  FiringsReader
}

// mountInsights adds the insights page for managers; it runs inside the session group.
func (s *Server) mountInsights(r chi.Router) {
	if s.Insights == nil || s.Firings == nil {
		return
	}
	s.forRole(r, desk.RoleManager).Get("/insights", s.handleInsights)
}

// insightsRanges are the page's ranges and the width of one point in each: about a hundred
// points at most, so a line still reads as a line.
var insightsRanges = []struct {
	value, label string
	span, bucket time.Duration
	bucketLabel  string
	format       string
}{
	{"24h", "Last 24 hours", 24 * time.Hour, 15 * time.Minute, "15 minutes", "01-02 15:04"},
	{"7d", "Last 7 days", 7 * 24 * time.Hour, time.Hour, "hour", "01-02 15:00"},
	{"30d", "Last 30 days", 30 * 24 * time.Hour, 24 * time.Hour, "day", "2006-01-02"},
}

// staleAfter is how far behind the rollups may be before the page says so: the job runs
// every few seconds, so minutes behind means it is not running.
const staleAfter = 5 * time.Minute

// The colours of the series; SVG attributes, since the page's policy refuses inline styles.
const (
	colorBlue      = "#2563eb"
	colorOrange    = "#ea580c"
	colorGreen     = "#16a34a"
	colorRed       = "#dc2626"
	colorPurple    = "#7c3aed"
	colorDarkGreen = "#166534"
	colorDarkRed   = "#991b1b"
)

func (s *Server) handleInsights(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	form := views.InsightsFilter{Range: q.Get("range"), Tenant: q.Get("tenant"), Kind: q.Get("kind"), Provider: strings.TrimSpace(q.Get("provider")),
		API: strings.TrimSpace(q.Get("api"))}
	if form.Range == "" {
		form.Range = "7d"
	}
	rg := -1
	for i, x := range insightsRanges {
		if x.value == form.Range {
			rg = i
		}
	}
	if rg < 0 {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "There is no range %q; choose 24h, 7d or 30d.", form.Range))
		return
	}
	spec := insightsRanges[rg]
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	// Whole buckets, the current one included: the last point fills up as time goes on.
	now := s.Clock.Now().UTC()
	// The range starts where the reconciliation table's does (rangeFrom), so the rates are
	// those of its counts.
	to := now.Truncate(spec.bucket).Add(spec.bucket)
	f := recon.MetricsFilter{Window: recon.Window{From: rangeFrom(spec.value, now, spec.bucket), To: to}, Bucket: spec.bucket,
		Kind: ops.Kind(form.Kind), Provider: form.Provider, API: form.API}
	if f.TenantID, err = checkGroupFilter(tenants, form.Tenant, f.Kind, f.Provider); err != nil {
		s.Error(w, r, err)
		return
	}
	apis := apiChoices(s.kinds())
	if err := checkAPI(apis, f.API); err != nil {
		s.Error(w, r, err)
		return
	}
	fig, err := s.insightsFigures(ctx, f)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.InsightsPage{Viewer: viewer(userFrom(ctx)), Filter: form, BucketLabel: spec.bucketLabel}
	m.Freshness, m.Stale = freshness(fig.state, now)
	for _, x := range insightsRanges {
		m.Ranges = append(m.Ranges, views.Option{Value: x.value, Label: x.label, Selected: x.value == form.Range})
	}
	m.Tenants, m.Kinds, m.APIs = tenantOptions(tenants, form.Tenant), kindOptions(s.kinds(), form.Kind), apiOptions(apis, form.API)
	m.Charts = insightCharts(f, spec.format, fig.rows, fig.backlog, s.kind)
	m.ByAPI = byAPI(apis, fig.rows)
	what := "the previous " + spanText(fig.prev.To.Sub(fig.prev.From))
	m.Compared = fmt.Sprintf("Each headline's comparison counts %s, the range up to its last whole %s, against %s, %s.",
		windowText(fig.cur.Window), unitText(fig.cur.Bucket), what, windowText(fig.prev.Window))
	compareCharts(m.Charts, period{sumInsights(fig.cur, spec.format, fig.curRows, s.kind), lastSnapshot(fig.backlog, f.Window)},
		period{sumInsights(fig.prev, spec.format, fig.prevRows, s.kind), lastSnapshot(fig.backlog, fig.prev.Window)}, what)
	bandCharts(m.Charts, alerts.Firings(fig.transitions, f.From, f.To), f.Window, f.Bucket,
		map[string]string{"tenant": form.Tenant, "kind": form.Kind, "provider": form.Provider, "api": form.API})
	s.render(w, r, http.StatusOK, views.Insights(m))
}

// insightsFigures are what the page draws: the rollups of the range, of its compared hours
// and of the period before those, the backlog snapshots of the range and that period, the
// rollup job's state and the alert history.
type insightsFigures struct {
	// cur is the range up to its last whole unit and prev the period of the same length
	// before it (comparedPeriods), both read in rows of that unit.
	cur, prev               recon.MetricsFilter
	rows, curRows, prevRows []recon.MetricsRow
	backlog                 []recon.BacklogPoint
	state                   recon.RollupState
	transitions             []alerts.Transition
}

func (s *Server) insightsFigures(ctx context.Context, f recon.MetricsFilter) (insightsFigures, error) {
	var fig insightsFigures
	var err error
	fig.cur, fig.prev = f, f
	fig.cur.Window, fig.prev.Window, fig.cur.Bucket = comparedPeriods(f.From, s.Clock.Now().UTC(), f.Bucket)
	fig.prev.Bucket = fig.cur.Bucket
	if fig.rows, err = s.Insights.RollupMetrics(ctx, f); err != nil {
		return fig, err
	}
	if fig.curRows, err = s.Insights.RollupMetrics(ctx, fig.cur); err != nil {
		return fig, err
	}
	if fig.prevRows, err = s.Insights.RollupMetrics(ctx, fig.prev); err != nil {
		return fig, err
	}
	// One read over both periods: the previous one's last snapshot is its headline's
	// comparison; points outside the range are not drawn.
	if fig.backlog, err = s.Insights.BacklogSeries(ctx, recon.BacklogFilter{Window: recon.Window{From: fig.prev.From, To: f.To},
		Bucket: f.Bucket, TenantID: f.TenantID, Kind: f.Kind, Provider: f.Provider}); err != nil {
		return fig, err
	}
	if fig.state, err = s.Insights.RollupStatus(ctx); err != nil {
		return fig, err
	}
	fig.transitions, err = s.Firings.AlertTransitions(ctx, f.From, f.To)
	return fig, err
}

// freshness says up to when the rollups count, and whether that is late.
func freshness(st recon.RollupState, now time.Time) (string, bool) {
	if !st.Ran() {
		return "The rollup job has not run yet: nothing is counted so far.", true
	}
	lag := now.Sub(st.MinutesUntil).Truncate(time.Second)
	msg := fmt.Sprintf("Counted up to %s UTC (%s ago).", st.MinutesUntil.UTC().Format("2006-01-02 15:04:05"), max(lag, 0))
	if lag > staleAfter {
		return msg + " The rollup job is behind: newer rows are not shown yet.", true
	}
	return msg, false
}

// insightCharts turns the rollup rows (per bucket and group) and the backlog snapshots into
// the page's charts, one point per bucket of the window; kind describes the rows' kinds.
func insightCharts(f recon.MetricsFilter, format string, rows []recon.MetricsRow, backlog []recon.BacklogPoint, kind func(ops.Kind) ops.KindSpec) []views.Chart {
	in := sumInsights(f, format, rows, kind)
	charts := in.rateCharts()
	bl := backlogCharts(in.buckets, in.labels, in.index, backlog)
	if f.API != "" {
		// The backlog snapshots count operations per kind, not per API: say so rather than
		// pass every API's backlog off as this one's.
		for i := range bl {
			bl[i].Note = strings.TrimSpace(bl[i].Note + " Not split by API: this counts the calls of every API.")
		}
	}
	charts = append(charts, bl...)
	return append(charts, in.moneyCharts()...)
}

// insightSums are the rollup rows summed over the groups, per bucket of the window.
type insightSums struct {
	buckets []time.Time
	labels  []string
	index   map[time.Time]int  // a bucket's position in buckets
	sums    []recon.MetricsRow // per bucket
	total   recon.MetricsRow   // over the window
	// saved and lost hold per family and currency one value per bucket, in major units;
	// savedTotal and lostTotal the sums over the window, in micro-units.
	saved, lost           map[moneyKey][]float64
	savedTotal, lostTotal map[moneyKey]int64
}

// moneyKey names a money series: a family of operations and a currency.
type moneyKey struct {
	family   moneyFamily
	currency string
}

// moneyFamily splits the money charts by what the money paid for: refunds in their own
// currencies, and LLM generations, whose costs are in their price table's currency.
type moneyFamily int

// The families, in the order the charts show them.
const (
	familyRefunds moneyFamily = iota
	familyLLM
)

// familyOf is the family of an operation kind: generations at an LLM provider count with
// the LLM; the rest, and rows with no operation (orphan charges, refused requests), with
// refunds.
func familyOf(spec ops.KindSpec) moneyFamily {
	if spec.Generation {
		return familyLLM
	}
	return familyRefunds
}

// The families' names, and what their lost money is called.
var (
	familyNames = map[moneyFamily]string{familyRefunds: "Refunds", familyLLM: "LLM"}
	lostTo      = map[moneyFamily]string{familyRefunds: "lost to double charges", familyLLM: "lost to double billing"}
)

// sumInsights adds up rows per bucket of f's window, labelling each bucket with format.
func sumInsights(f recon.MetricsFilter, format string, rows []recon.MetricsRow, kind func(ops.Kind) ops.KindSpec) *insightSums {
	in := &insightSums{index: map[time.Time]int{}, saved: map[moneyKey][]float64{}, lost: map[moneyKey][]float64{},
		savedTotal: map[moneyKey]int64{}, lostTotal: map[moneyKey]int64{},
		total: recon.MetricsRow{Saved: recon.Money{}, Lost: recon.Money{}}}
	for b := f.From; b.Before(f.To); b = b.Add(f.Bucket) {
		in.index[b] = len(in.buckets)
		in.buckets = append(in.buckets, b)
		in.labels = append(in.labels, b.Format(format))
	}
	n := len(in.buckets)
	in.sums = make([]recon.MetricsRow, n)
	for i := range in.sums {
		in.sums[i].Saved, in.sums[i].Lost = recon.Money{}, recon.Money{}
	}
	for _, r := range rows {
		i, ok := in.index[r.Bucket]
		if !ok {
			continue
		}
		addMetrics(&in.sums[i], r)
		f := familyOf(kind(r.Kind))
		for c, v := range r.Saved {
			k := moneyKey{f, c}
			saved, _ := in.money(k)
			saved[i] += ops.MajorUnits(v, c)
			in.savedTotal[k] += v
		}
		for c, v := range r.Lost {
			k := moneyKey{f, c}
			_, lost := in.money(k)
			lost[i] += ops.MajorUnits(v, c)
			in.lostTotal[k] += v
		}
	}
	for _, r := range in.sums {
		addMetrics(&in.total, r)
	}
	return in
}

// money returns the saved and lost series of k, made on first use: a family that only lost
// money in a currency still has a saved series, which is what lists the families and
// currencies.
func (in *insightSums) money(k moneyKey) (saved, lost []float64) {
	if in.saved[k] == nil {
		n := len(in.buckets)
		in.saved[k], in.lost[k] = make([]float64, n), make([]float64, n)
	}
	return in.saved[k], in.lost[k]
}

// duplicateNote defines the duplicate rate: of the requests that asked for a paid side
// effect, those that repeated one already asked for. A refused request and a cancel asked
// for none, so the rate leaves them out, as the alert rules and /reconcile's "Admitted
// requests" do.
const duplicateNote = "Client requests mapped to an operation that already existed, of the admitted requests: " +
	"every client request but those refused at the door (bad input, a budget, a share) and the cancels of background responses, " +
	"which ask for no paid call."

// replayNote defines the replay rate: of the admitted requests, as the duplicate rate counts
// them, those answered from a stored result. A refused request or a cancel could be neither
// a replay nor a new call, and a replay is a duplicate answered so, so both rates share one
// denominator and a flood of refusals makes neither look rarer.
const replayNote = "Client requests answered from a stored result instead of a new call to the provider, of the admitted requests: " +
	"every client request but those refused at the door (bad input, a budget, a share) and the cancels of background responses."

// rateCharts are the charts of rates and counts: duplicates, replays, timeouts, and double
// and orphan charges.
func (in *insightSums) rateCharts() []views.Chart {
	n, total, labels := len(in.buckets), in.total, in.labels
	rate := func(num, den func(recon.MetricsRow) int64) []*float64 {
		out := make([]*float64, n)
		for i, r := range in.sums {
			if d := den(r); d > 0 {
				v := 100 * float64(num(r)) / float64(d)
				out[i] = &v
			}
		}
		return out
	}
	count := func(v func(recon.MetricsRow) int64) []*float64 {
		out := make([]*float64, n)
		for i, r := range in.sums {
			x := float64(v(r))
			out[i] = &x
		}
		return out
	}
	pct := func(num, den int64, what string) string {
		if den == 0 {
			return "No " + what + " in this range."
		}
		return fmt.Sprintf("%s %% over the range (%d of %d %s).", views.FormatValue(roundTo(100*float64(num)/float64(den), 2)), num, den, what)
	}
	return []views.Chart{
		{ID: "duplicate-rate", Title: "Duplicate request rate", Unit: "%", Buckets: labels,
			Note:    duplicateNote,
			Summary: pct(total.Duplicates, total.Admitted(), "admitted requests"),
			Series: []views.ChartSeries{{Name: "Duplicates", Color: colorBlue,
				Values: rate(func(r recon.MetricsRow) int64 { return r.Duplicates }, recon.MetricsRow.Admitted)}}},
		{ID: "replay-rate", Title: "Replay rate", Unit: "%", Buckets: labels,
			Note:    replayNote,
			Summary: pct(total.Replays, total.Admitted(), "admitted requests"),
			Series: []views.ChartSeries{{Name: "Replays", Color: colorGreen,
				Values: rate(func(r recon.MetricsRow) int64 { return r.Replays }, recon.MetricsRow.Admitted)}}},
		{ID: "timeout-rate", Title: "Timeout rate", Unit: "%", Buckets: labels,
			Note:    "Attempts whose outcome is unknown because the provider did not answer in time, of all attempts sent.",
			Summary: pct(total.Timeouts, total.AttemptsSent, "attempts sent"),
			Series: []views.ChartSeries{{Name: "Timeouts", Color: colorOrange,
				Values: rate(func(r recon.MetricsRow) int64 { return r.Timeouts }, func(r recon.MetricsRow) int64 { return r.AttemptsSent })}}},
		{ID: "double-charges", Title: "Double and orphan charges", Bars: true, Buckets: labels,
			Note: "Provider charges beyond the first for one operation (by when the operation was created), and charges naming no operation. Both should be zero.",
			Summary: fmt.Sprintf("%d double %s, %d orphan %s in this range.", total.DoubleCharges, plural(total.DoubleCharges, "charge", "charges"),
				total.Orphans, plural(total.Orphans, "charge", "charges")),
			Series: []views.ChartSeries{
				{Name: "Double charges", Color: colorRed, Values: count(func(r recon.MetricsRow) int64 { return r.DoubleCharges })},
				{Name: "Orphan charges", Color: colorPurple, Values: count(func(r recon.MetricsRow) int64 { return r.Orphans })}}},
	}
}

// moneyCharts are the money saved and lost, one chart per currency with refunds and LLM
// generations side by side; one empty chart when no money moved.
func (in *insightSums) moneyCharts() []views.Chart {
	n, labels := len(in.buckets), in.labels
	byCurrency := map[string][]moneyFamily{}
	for k := range in.saved {
		byCurrency[k.currency] = append(byCurrency[k.currency], k.family)
	}
	currencies := make([]string, 0, len(byCurrency))
	for c := range byCurrency {
		currencies = append(currencies, c)
	}
	sort.Strings(currencies)
	if len(currencies) == 0 {
		return []views.Chart{{ID: "money", Title: "Money saved and lost", Buckets: labels,
			Series: []views.ChartSeries{{Name: "Saved by replays", Color: colorGreen, Values: make([]*float64, n)},
				{Name: "Lost to double charges", Color: colorRed, Values: make([]*float64, n)}}}}
	}
	var charts []views.Chart
	for _, c := range currencies {
		unit := strings.ToUpper(c)
		if unit == "" {
			unit = "?"
		}
		families := byCurrency[c]
		slices.Sort(families)
		ch := views.Chart{ID: "money-" + url.PathEscape(c), Title: "Money saved and lost (" + unit + ")", Unit: unit, Bars: true,
			Buckets: labels,
			Note: "Saved: what each replayed request would have cost again (a refund's amount, an LLM generation's cost). " +
				"Lost: the amounts of double charges, and the cost of each LLM generation billed twice."}
		var sums []string
		for _, f := range families {
			k := moneyKey{f, c}
			name := familyNames[f]
			sums = append(sums, fmt.Sprintf("%s: saved %s, %s %s.", name, ops.FormatMicros(in.savedTotal[k], c), lostTo[f],
				ops.FormatMicros(in.lostTotal[k], c)))
			ch.Series = append(ch.Series, views.ChartSeries{Name: name + " saved by replays", Color: savedColor[f], Values: ptrs(in.saved[k])},
				views.ChartSeries{Name: name + " " + lostTo[f], Color: lostColor[f], Values: ptrs(in.lost[k])})
		}
		ch.Summary = strings.Join(sums, " ")
		charts = append(charts, ch)
	}
	return charts
}

// The colours of each family's saved and lost series: refunds in full colour, LLM in a
// darker shade of the same.
var (
	savedColor = map[moneyFamily]string{familyRefunds: colorGreen, familyLLM: colorDarkGreen}
	lostColor  = map[moneyFamily]string{familyRefunds: colorRed, familyLLM: colorDarkRed}
)

// backlogCharts draws the unknown and expired backlog from the last snapshot of each
// bucket; a bucket without a snapshot (the job was not running) is a gap, not a zero.
func backlogCharts(buckets []time.Time, labels []string, index map[time.Time]int, points []recon.BacklogPoint) []views.Chart {
	n := len(buckets)
	unknown, expired := make([]*float64, n), make([]*float64, n)
	ageU, ageE := make([]*float64, n), make([]*float64, n)
	var last *recon.BacklogPoint
	for _, p := range points {
		i, ok := index[p.Bucket]
		if !ok {
			continue
		}
		u, e := float64(p.Unknown), float64(p.Expired)
		unknown[i], expired[i] = &u, &e
		hours := func(oldest time.Time) *float64 {
			h := 0.0
			if !oldest.IsZero() {
				h = roundTo(p.TakenAt.Sub(oldest).Hours(), 2)
			}
			return &h
		}
		ageU[i], ageE[i] = hours(p.OldestUnknown), hours(p.OldestExpired)
		last = &p
	}
	summary, ageSummary := "No snapshot in this range.", "No snapshot in this range."
	if last != nil {
		summary = fmt.Sprintf("%d unknown and %d expired at %s UTC.", last.Unknown, last.Expired, last.TakenAt.Format("2006-01-02 15:04"))
		ageSummary = "No unknown operation at the last snapshot."
		if !last.OldestUnknown.IsZero() {
			ageSummary = fmt.Sprintf("The oldest unknown operation was %s old at the last snapshot.", last.TakenAt.Sub(last.OldestUnknown).Truncate(time.Minute))
		}
	}
	return []views.Chart{
		{ID: "backlog", Title: "Unknown backlog", Buckets: labels, Summary: summary,
			Note: "Operations waiting for a person or the reconciler: unknown (nothing more is sent) and expired (past the provider's key retention).",
			Series: []views.ChartSeries{{Name: "Unknown", Color: colorOrange, Values: unknown},
				{Name: "Expired", Color: colorRed, Values: expired}}},
		{ID: "backlog-age", Title: "Age of the oldest unknown operation", Unit: "h", Buckets: labels, Summary: ageSummary,
			Series: []views.ChartSeries{{Name: "Oldest unknown", Color: colorOrange, Values: ageU},
				{Name: "Oldest expired", Color: colorRed, Values: ageE}}},
	}
}

func ptrs(vs []float64) []*float64 {
	out := make([]*float64, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

func roundTo(v float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
