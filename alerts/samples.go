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
	counters map[[2]time.Time][]Row
	backlog  []Row
	backErr  error
	backRead bool
}

func (c *evalCache) windowRows(ctx context.Context, from, to time.Time) ([]Row, error) {
	k := [2]time.Time{from, to}
	if rows, ok := c.counters[k]; ok {
		return rows, nil
	}
	rows, err := c.src.Counters(ctx, from, to)
	if err != nil {
		return nil, fmt.Errorf("count %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	c.counters[k] = rows
	return rows, nil
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
	end := now.Add(-x.Offset)
	switch {
	case x.Form == FormRatio:
		long, err := cache.windowRows(ctx, end.Add(-x.Window), end)
		if err != nil {
			return nil, HealthError, "", err
		}
		var short map[string]*group
		if x.ShortWindow > 0 {
			rows, err := cache.windowRows(ctx, end.Add(-x.ShortWindow), end)
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
		rows, err := cache.windowRows(ctx, end.Add(-x.Window), end)
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
