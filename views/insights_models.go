package views

import (
	"math"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// InsightsPage is the managers' charts over time: duplicate, timeout and replay rates,
// double charges, the unknown backlog and money saved and lost.
type InsightsPage struct {
	Viewer  Viewer
	Filter  InsightsFilter
	Ranges  []Option
	Tenants []Option
	Kinds   []Option
	APIs    []Option
	// Freshness says up to when the rollups are counted; Stale marks it as late.
	Freshness string
	Stale     bool
	// BucketLabel says what one point is ("15 minutes", "hour", "day").
	BucketLabel string
	// Compared names the two periods the headlines' comparisons count, with their ends.
	Compared string
	Charts   []Chart
	// ByAPI splits the LLM figures of the range by the API each call went to.
	ByAPI []InsightsAPIRow
}

// InsightsAPIRow is the range's figures of the LLM calls of one API.
type InsightsAPIRow struct {
	// Label names the API as the filter does ("chat_completions"); API in words.
	Label, API                                            string
	Requests, Duplicates, Replays, AttemptsSent, Timeouts string
	DoubleCharges                                         string
	Saved, Lost                                           string
}

// InsightsFilter echoes the submitted filter back into the form.
type InsightsFilter struct {
	Range    string
	Tenant   string
	Kind     string
	Provider string
	// API is the label of the API the charts are narrowed to; "" for every API.
	API string
}

// Chart is one time series chart. Buckets label the x axis, one per point; each series
// has one value per bucket, nil where there is nothing to show (a rate with no requests).
type Chart struct {
	// ID names the chart in data-testid attributes: "chart-" + ID.
	ID    string
	Title string
	// Note says how the numbers are defined.
	Note string
	// Unit follows the y axis labels ("%", "", "USD").
	Unit string
	// Bars draws bars instead of lines: for sparse counts such as double charges.
	Bars    bool
	Buckets []string
	Series  []ChartSeries
	// Summary is the chart's headline, such as the total or the latest value; Compare
	// sets the range's compared hours against the previous period of the same length, as
	// InsightsPage.Compared names them.
	Summary string
	Compare string
	// Bands are the times an alert about this chart fired, shaded behind the series.
	Bands []ChartBand
}

// ChartBand is a stretch of the x axis, in buckets from the first one's start (2.5 is the
// middle of the third bucket), with what it marks.
type ChartBand struct {
	From, To float64
	Title    string
}

// ChartSeries is one line (or set of bars) of a chart.
type ChartSeries struct {
	Name   string
	Color  string
	Values []*float64
}

// Empty reports whether no series has a value to show.
func (c Chart) Empty() bool {
	for _, s := range c.Series {
		for _, v := range s.Values {
			if v != nil {
				return false
			}
		}
	}
	return true
}

// The drawing area of every chart, in SVG user units; the SVG scales to the page width.
const (
	chartW, chartH                   = 720.0, 220.0
	padLeft, padRight, padTop, padBo = 68.0, 12.0, 12.0, 28.0
)

// ChartPlot is a chart laid out for drawing: every coordinate already formatted.
type ChartPlot struct {
	ViewBox string
	// Frame is the plot area's edges.
	Left, Right, Top, Bottom string
	YTicks                   []ChartTick
	XTicks                   []ChartTick
	Lines                    []PlotLine
	Bars                     []PlotBar
	Bands                    []PlotBar
}

// ChartTick is one axis label and where it goes.
type ChartTick struct {
	X, Y  string
	Label string
}

// PlotLine is one series as polylines (a gap in the data splits it) and its points, each
// with a tooltip.
type PlotLine struct {
	Name     string
	Color    string
	Segments []string
	Points   []PlotPoint
}

// PlotPoint is one value of a line with its tooltip.
type PlotPoint struct {
	X, Y  string
	Title string
}

// PlotBar is one value drawn as a bar, with its tooltip.
type PlotBar struct {
	X, Y, W, H string
	Color      string
	Title      string
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// FormatValue writes a chart value: whole numbers without decimals, others with up to two.
func FormatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// niceMax rounds the largest value up to 1, 2 or 5 times a power of ten, so the axis
// labels are round numbers.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// Plot lays the chart out: a zero-based y axis up to a round maximum, three y labels, up
// to six x labels, lines split at gaps, bars side by side within a bucket.
func (c Chart) Plot() ChartPlot {
	n := len(c.Buckets)
	var top float64
	for _, s := range c.Series {
		for _, v := range s.Values {
			if v != nil && *v > top {
				top = *v
			}
		}
	}
	top = niceMax(top)
	w, h := chartW-padLeft-padRight, chartH-padTop-padBo
	slot := w / math.Max(float64(n), 1)
	x := func(i int) float64 { return padLeft + slot*(float64(i)+0.5) }
	y := func(v float64) float64 { return padTop + h - v/top*h }
	p := ChartPlot{ViewBox: "0 0 " + coord(chartW) + " " + coord(chartH),
		Left: coord(padLeft), Right: coord(chartW - padRight), Top: coord(padTop), Bottom: coord(padTop + h)}
	for _, f := range []float64{0, 0.5, 1} {
		label := FormatValue(top * f)
		if c.Unit != "" {
			label += " " + c.Unit
		}
		p.YTicks = append(p.YTicks, ChartTick{X: coord(padLeft - 6), Y: coord(y(top*f) + 4), Label: label})
	}
	for _, b := range c.Bands {
		// At least a pixel or two wide, so a short firing on a month's chart still shows.
		left, right := padLeft+slot*b.From, padLeft+slot*b.To
		if right-left < 2 {
			right = left + 2
		}
		p.Bands = append(p.Bands, PlotBar{X: coord(left), Y: coord(padTop), W: coord(right - left), H: coord(h), Title: b.Title})
	}
	if n > 0 {
		step := max(1, (n+5)/6)
		for i := 0; i < n; i += step {
			p.XTicks = append(p.XTicks, ChartTick{X: coord(x(i)), Y: coord(chartH - 8), Label: c.Buckets[i]})
		}
	}
	if c.Bars {
		bw := slot * 0.8 / math.Max(float64(len(c.Series)), 1)
		for si, s := range c.Series {
			for i, v := range s.Values {
				if v == nil || *v == 0 || i >= n {
					continue
				}
				left := padLeft + slot*float64(i) + slot*0.1 + bw*float64(si)
				p.Bars = append(p.Bars, PlotBar{X: coord(left), Y: coord(y(*v)), W: coord(math.Max(bw, 1)), H: coord(padTop + h - y(*v)),
					Color: s.Color, Title: c.Buckets[i] + ": " + s.Name + " " + FormatValue(*v) + unitSuffix(c.Unit)})
			}
		}
		return p
	}
	for _, s := range c.Series {
		line := PlotLine{Name: s.Name, Color: s.Color}
		var seg []string
		flush := func() {
			if len(seg) > 0 {
				line.Segments = append(line.Segments, strings.Join(seg, " "))
			}
			seg = nil
		}
		for i, v := range s.Values {
			if v == nil || i >= n {
				flush()
				continue
			}
			px, py := coord(x(i)), coord(y(*v))
			seg = append(seg, px+","+py)
			line.Points = append(line.Points, PlotPoint{X: px, Y: py, Title: c.Buckets[i] + ": " + s.Name + " " + FormatValue(*v) + unitSuffix(c.Unit)})
		}
		flush()
		p.Lines = append(p.Lines, line)
	}
	return p
}

func unitSuffix(unit string) string {
	if unit == "" {
		return ""
	}
	if unit == "%" {
		return " %"
	}
	return " " + unit
}

// cellValue writes the i-th value of a series for the numbers table; a gap is a dash.
func cellValue(vals []*float64, i int) string {
	if i >= len(vals) || vals[i] == nil {
		return "—"
	}
	return FormatValue(*vals[i])
}

// apiTable lists the range's LLM figures, one row per API.
func apiTable(rows []InsightsAPIRow) Table {
	t := Table{Columns: []Column{{Label: "API"}, {Label: "Client requests", Num: true}, {Label: "Duplicates", Num: true},
		{Label: "Replays", Num: true}, {Label: "Attempts sent", Num: true}, {Label: "Timeouts", Num: true},
		{Label: "Double billed", Num: true}, {Label: "Saved by replays", Num: true}, {Label: "Lost to double billing", Num: true}}}
	for _, r := range rows {
		num := func(text, testID string) Cell { return Cell{Text: text, Class: "num", TestID: testID} }
		t.Rows = append(t.Rows, TableRow{
			Attrs: templ.OrderedAttributes{dataAttr("data-testid", "insights-api-row"), dataAttr("data-api", r.Label)},
			Cells: []Cell{
				{Text: r.API, TestID: "api-name"},
				num(r.Requests, "api-requests"), num(r.Duplicates, "api-duplicates"), num(r.Replays, "api-replays"),
				num(r.AttemptsSent, "api-attempts"), num(r.Timeouts, "api-timeouts"), num(r.DoubleCharges, "api-double"),
				num(r.Saved, "api-saved"), num(r.Lost, "api-lost"),
			},
		})
	}
	return t
}

// numbersTable is the chart's data as a table, one row per bucket, for screen readers and
// for copying.
func (c Chart) numbersTable() Table {
	t := Table{Columns: []Column{{Label: "Time (UTC)"}}}
	for _, s := range c.Series {
		t.Columns = append(t.Columns, Column{Label: s.Name, Num: true})
	}
	for i, b := range c.Buckets {
		row := TableRow{Attrs: templ.OrderedAttributes{dataAttr("data-testid", "chart-row")}, Cells: []Cell{{Text: b, Class: "mono"}}}
		for _, s := range c.Series {
			row.Cells = append(row.Cells, Cell{Text: cellValue(s.Values, i), Class: "num"})
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
