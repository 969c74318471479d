package alerts

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"
)

// evalCache reads each window once per pass, however many rules use it.
type evalCache struct {
	src      Source
	counters map[Window][]Row
	backlog  []Row
	backErr  error
	backRead bool
}

func (c *evalCache) windowRows(ctx context.Context, w Window) ([]Row, error) {
	if rows, ok := c.counters[w]; ok {
		return rows, nil
	}
	rows, err := c.src.Counters(ctx, w.From, w.To)
	if err != nil {
		return nil, fmt.Errorf("count %s to %s: %w", w.From.Format(time.RFC3339), w.To.Format(time.RFC3339), err)
	}
	c.counters[w] = rows
	return rows, nil
}

// prefetch reads the windows the groups' rules read at now in one call, so that the rows
// two windows share (those of the last minute, which every window ending now holds) are
// read once per pass, not once per window. When that call fails, nothing is kept: each
// window is then read alone as its rules ask for it, and a window that fails alone fails
// its own rules only.
func (c *evalCache) prefetch(ctx context.Context, groups []*Group, now time.Time) {
	var ws []Window
	seen := map[Window]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			long, short, ok := exprWindows(r.Expr, now)
			for _, w := range []Window{long, short} {
				if ok && w.To.After(w.From) && !seen[w] {
					seen[w] = true
					ws = append(ws, w)
				}
			}
		}
	}
	if len(ws) < 2 {
		return
	}
	rows, err := c.src.CountersAll(ctx, ws)
	if err != nil || len(rows) != len(ws) {
		return
	}
	for i, w := range ws {
		c.counters[w] = rows[i]
	}
}

// exprWindows are the windows x reads at now: its window, and for a ratio its short window
// (empty when it has none); ok is false for a backlog signal, which reads none.
func exprWindows(x Expr, now time.Time) (long, short Window, ok bool) {
	if x.Form != FormRatio && !windowed[x.Signal] {
		return Window{}, Window{}, false
	}
	end := now.Add(-x.Offset)
	long = Window{From: end.Add(-x.Window), To: end}
	if x.Form == FormRatio && x.ShortWindow > 0 {
		short = Window{From: end.Add(-x.ShortWindow), To: end}
	}
	return long, short, true
}

func (c *evalCache) backlogRows(ctx context.Context, now time.Time) ([]Row, error) {
	if !c.backRead {
		c.backlog, c.backErr = c.src.Backlog(ctx, now)
		c.backRead = true
		if c.backErr != nil {
			c.backErr = fmt.Errorf("read the backlog: %w", c.backErr)
		}
	}
	return c.backlog, c.backErr
}

// sample is one label set's value, and whether the rule's condition holds for it.
type sample struct {
	labels map[string]string
	value  float64
	hit    bool
}

type group struct {
	labels map[string]string
	values map[Signal]float64
}

// aggregate adds rows up by the labels in by: counts are summed, ages take the oldest.
func aggregate(rows []Row, by []string) map[string]*group {
	out := map[string]*group{}
	for _, r := range rows {
		labels := map[string]string{}
		for _, l := range by {
			var v string
			switch l {
			case LabelTenant:
				v = r.Tenant
			case LabelKind:
				v = r.Kind
			case LabelProvider:
				v = r.Provider
			case LabelAPI:
				v = r.API
			}
			// An empty value is no label at all, as in Prometheus.
			if v != "" {
				labels[l] = v
			}
		}
		k := labelString(labels)
		g := out[k]
		if g == nil {
			g = &group{labels: labels, values: map[Signal]float64{}}
			out[k] = g
		}
		for s, v := range r.Values {
			if ages[s] {
				g.values[s] = math.Max(g.values[s], v)
			} else {
				g.values[s] += v
			}
		}
	}
	for _, g := range out {
		g.values[ChargeDifference] = math.Abs(g.values[ProviderCharges] - g.values[Succeeded])
	}
	return out
}

func sortedGroups(m map[string]*group) []*group {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*group, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// evaluate computes r's samples at now.
func evaluate(ctx context.Context, cache *evalCache, r *Rule, now time.Time) ([]sample, Health, string, error) {
	x := r.Expr
	lw, sw, _ := exprWindows(x, now)
	switch {
	case x.Form == FormRatio:
		long, err := cache.windowRows(ctx, lw)
		if err != nil {
			return nil, HealthError, "", err
		}
		var short map[string]*group
		if x.ShortWindow > 0 {
			rows, err := cache.windowRows(ctx, sw)
			if err != nil {
				return nil, HealthError, "", err
			}
			short = aggregate(rows, x.By)
		}
		var out []sample
		quiet, empty := 0, 0
		for _, g := range sortedGroups(aggregate(long, x.By)) {
			den := g.values[x.Denominator]
			if den == 0 {
				empty++
				continue
			}
			if den < x.MinRequests {
				// Too few requests to mean anything: the label set stays quiet.
				quiet++
				continue
			}
			s := sample{labels: g.labels, value: g.values[x.Numerator] / den}
			s.hit = s.value > x.Threshold
			if short != nil {
				sg := short[labelString(g.labels)]
				// Both windows must burn: the long one says it matters, the short one says
				// it is still happening.
				s.hit = s.hit && sg != nil && sg.values[x.Denominator] > 0 &&
					sg.values[x.Numerator]/sg.values[x.Denominator] > x.Threshold
			}
			out = append(out, s)
		}
		switch {
		case len(out) > 0:
			return out, HealthOK, "", nil
		case quiet > 0:
			return nil, HealthNoData, fmt.Sprintf("fewer than %g %s in %s: quiet", x.MinRequests, x.Denominator, FormatDuration(x.Window)), nil
		default:
			return nil, HealthNoData, fmt.Sprintf("no %s in the last %s", x.Denominator, FormatDuration(x.Window)), nil
		}
	case windowed[x.Signal]:
		rows, err := cache.windowRows(ctx, lw)
		if err != nil {
			return nil, HealthError, "", err
		}
		return samplesOf(aggregate(rows, x.By), x), HealthOK, "", nil
	default:
		rows, err := cache.backlogRows(ctx, now)
		if err != nil {
			return nil, HealthError, "", err
		}
		return samplesOf(aggregate(rows, x.By), x), HealthOK, "", nil
	}
}

func samplesOf(groups map[string]*group, x Expr) []sample {
	var out []sample
	for _, g := range sortedGroups(groups) {
		v := g.values[x.Signal]
		out = append(out, sample{labels: g.labels, value: v, hit: v > x.Threshold})
	}
	return out
}
