package alerts

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// parser reads the node tree of one rules file, so that every mistake it reports carries the
// file and the line of the node at fault.
type parser struct{ file string }

func (p *parser) errf(n *yaml.Node, reason string) error {
	return &ParseError{File: p.file, Line: n.Line, Reason: reason}
}

// mapping checks n is a mapping with only the allowed keys and returns its values by key.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, what+" must be a mapping")
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ok := false
		for _, a := range allowed {
			ok = ok || a == k.Value
		}
		if !ok {
			return nil, p.errf(k, fmt.Sprintf("unknown field %q in %s; expected one of %s", k.Value, what, strings.Join(allowed, ", ")))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errf(k, fmt.Sprintf("field %q is given twice", k.Value))
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p *parser) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errf(n, what+" must be a string")
	}
	return n.Value, nil
}

func (p *parser) duration(n *yaml.Node, what string) (time.Duration, error) {
	if n == nil {
		return 0, nil
	}
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, what+" must be a duration such as 30s, 5m, 1h or 1d")
	}
	d, err := ParseDuration(n.Value)
	if err != nil {
		return 0, p.errf(n, fmt.Sprintf("%s: %v", what, err))
	}
	return d, nil
}

func (p *parser) number(n *yaml.Node, what string) (float64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, what+" must be a number")
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return 0, p.errf(n, fmt.Sprintf("%s: %q is not a number", what, n.Value))
	}
	// NaN and the infinities parse, but a comparison with them is always false or always
	// true: a rule holding one would load and then never fire, with nothing to say so.
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, p.errf(n, fmt.Sprintf("%s: %q must be a finite number", what, n.Value))
	}
	return f, nil
}

func (p *parser) stringMap(n *yaml.Node, what string) (map[string]string, error) {
	if n == nil {
		return map[string]string{}, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, what+" must be a mapping of names to strings")
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !labelNameRE.MatchString(k.Value) {
			return nil, p.errf(k, fmt.Sprintf("%q is not a valid label name", k.Value))
		}
		s, err := p.str(v, what+"."+k.Value)
		if err != nil {
			return nil, err
		}
		out[k.Value] = s
	}
	return out, nil
}

var (
	labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	alertNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func (p *parser) group(n *yaml.Node) (*Group, error) {
	f, err := p.mapping(n, "a group", "name", "interval", "rules")
	if err != nil {
		return nil, err
	}
	g := &Group{Interval: DefaultInterval}
	if f["name"] == nil {
		return nil, p.errf(n, "a group needs a 'name'")
	}
	if g.Name, err = p.str(f["name"], "name"); err != nil {
		return nil, err
	}
	if g.Name == "" || strings.Contains(g.Name, "/") {
		return nil, p.errf(f["name"], "a group name must be non-empty and contain no '/'")
	}
	if f["interval"] != nil {
		if g.Interval, err = p.duration(f["interval"], "interval"); err != nil {
			return nil, err
		}
		if g.Interval < time.Second {
			return nil, p.errf(f["interval"], "interval must be at least 1s")
		}
	}
	rs := f["rules"]
	if rs == nil || rs.Kind != yaml.SequenceNode || len(rs.Content) == 0 {
		at := n
		if rs != nil {
			at = rs
		}
		return nil, p.errf(at, fmt.Sprintf("group %q needs a non-empty 'rules' list", g.Name))
	}
	for _, rn := range rs.Content {
		r, err := p.rule(rn, g)
		if err != nil {
			return nil, err
		}
		g.Rules = append(g.Rules, r)
	}
	return g, nil
}

func (p *parser) rule(n *yaml.Node, g *Group) (*Rule, error) {
	f, err := p.mapping(n, "a rule", "alert", "expr", "for", "keep_firing_for", "labels", "annotations")
	if err != nil {
		return nil, err
	}
	r := &Rule{Group: g.Name, Line: n.Line}
	if f["alert"] == nil {
		return nil, p.errf(n, "a rule needs an 'alert' name (recording rules are not supported)")
	}
	if r.Alert, err = p.str(f["alert"], "alert"); err != nil {
		return nil, err
	}
	if !alertNameRE.MatchString(r.Alert) {
		return nil, p.errf(f["alert"], fmt.Sprintf("%q is not a valid alert name", r.Alert))
	}
	if f["expr"] == nil {
		return nil, p.errf(n, fmt.Sprintf("rule %s needs an 'expr'", r.Alert))
	}
	if r.Expr, err = p.expr(f["expr"]); err != nil {
		return nil, err
	}
	if r.Expr.Window > MaxWindow {
		return nil, p.errf(fieldNode(f["expr"], "window"), fmt.Sprintf("rule %s: window %s is too long; the longest window allowed is %s",
			r.Alert, FormatDuration(r.Expr.Window), FormatDuration(MaxWindow)))
	}
	if r.For, err = p.duration(f["for"], "for"); err != nil {
		return nil, err
	}
	if r.KeepFiringFor, err = p.duration(f["keep_firing_for"], "keep_firing_for"); err != nil {
		return nil, err
	}
	if r.Labels, err = p.stringMap(f["labels"], "labels"); err != nil {
		return nil, err
	}
	for _, l := range []string{"alertname", LabelTenant, LabelKind, LabelProvider, LabelAPI} {
		if _, ok := r.Labels[l]; ok {
			return nil, p.errf(f["labels"], fmt.Sprintf("label %q is set by the evaluator and cannot be given", l))
		}
	}
	if r.Annotations, err = p.stringMap(f["annotations"], "annotations"); err != nil {
		return nil, err
	}
	for k, v := range r.Annotations {
		if _, err := newTemplate(k, v); err != nil {
			return nil, p.errf(fieldNode(f["annotations"], k), fmt.Sprintf("annotation %s: %v", k, err))
		}
	}
	return r, nil
}

// fieldNode is the value of key in mapping m, or m itself when key is absent: where an error
// about that field points.
func fieldNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return m
}

func signalList(m map[Signal]bool) string {
	var s []string
	for k := range m {
		s = append(s, string(k))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// expr reads a rule's expression: exactly one form (ratio, count or age), its windows, a
// threshold and the labels to group by.
func (p *parser) expr(n *yaml.Node) (Expr, error) {
	f, err := p.mapping(n, "expr", "ratio", "count", "age", "window", "short_window", "offset", "above",
		"burn_rate", "objective", "min_requests", "by")
	if err != nil {
		return Expr{}, err
	}
	var e Expr
	forms := 0
	for _, k := range []string{"ratio", "count", "age"} {
		if f[k] != nil {
			forms++
			e.Form = Form(k)
		}
	}
	if forms != 1 {
		return e, p.errf(n, "expr needs exactly one of 'ratio', 'count' or 'age'")
	}
	if e.Window, err = p.duration(f["window"], "window"); err != nil {
		return e, err
	}
	if e.ShortWindow, err = p.duration(f["short_window"], "short_window"); err != nil {
		return e, err
	}
	if e.Offset, err = p.duration(f["offset"], "offset"); err != nil {
		return e, err
	}
	switch e.Form {
	case FormRatio:
		err = p.ratio(n, f, &e)
	case FormCount:
		err = p.count(n, f, &e)
	case FormAge:
		err = p.age(f, &e)
	}
	if err != nil {
		return e, err
	}
	if f["min_requests"] != nil {
		if e.Form != FormRatio {
			return e, p.errf(f["min_requests"], "min_requests applies to ratios only")
		}
		if e.MinRequests, err = p.number(f["min_requests"], "min_requests"); err != nil {
			return e, err
		}
	}
	if err := p.threshold(n, f, &e); err != nil {
		return e, err
	}
	if bn := f["by"]; bn != nil {
		if err := p.by(bn, &e); err != nil {
			return e, err
		}
	}
	return e, nil
}

// ratio reads a ratio expression's 'numerator / denominator'; both must be windowed
// counters, and the windows must make sense for them.
func (p *parser) ratio(n *yaml.Node, f map[string]*yaml.Node, e *Expr) error {
	s, err := p.str(f["ratio"], "ratio")
	if err != nil {
		return err
	}
	num, den, ok := strings.Cut(s, "/")
	e.Numerator, e.Denominator = Signal(strings.TrimSpace(num)), Signal(strings.TrimSpace(den))
	if !ok || !windowed[e.Numerator] || !windowed[e.Denominator] || e.Numerator == ChargeDifference || e.Denominator == ChargeDifference {
		return p.errf(f["ratio"], fmt.Sprintf("ratio must be 'numerator / denominator' of counters (%s)", signalList(windowedCounters())))
	}
	if e.Window == 0 {
		return p.errf(n, "a ratio needs a 'window'")
	}
	if e.ShortWindow >= e.Window {
		return p.errf(f["short_window"], "short_window must be shorter than window")
	}
	return nil
}

// count reads a count expression: a windowed signal needs a window, a backlog signal is
// counted as it is now and takes none.
func (p *parser) count(n *yaml.Node, f map[string]*yaml.Node, e *Expr) error {
	s, err := p.str(f["count"], "count")
	if err != nil {
		return err
	}
	e.Signal = Signal(s)
	switch {
	case windowed[e.Signal]:
		if e.Window == 0 {
			return p.errf(n, fmt.Sprintf("counting %s needs a 'window'", s))
		}
	case backlog[e.Signal]:
		if f["window"] != nil || f["offset"] != nil {
			return p.errf(f["count"], fmt.Sprintf("%s is counted as it is now; it takes no window or offset", s))
		}
	default:
		all := map[Signal]bool{}
		for k := range windowed {
			all[k] = true
		}
		for k := range backlog {
			all[k] = true
		}
		return p.errf(f["count"], fmt.Sprintf("unknown count %q; expected one of %s", s, signalList(all)))
	}
	if f["short_window"] != nil {
		return p.errf(f["short_window"], "short_window applies to ratios only")
	}
	return nil
}

// age reads an age expression, which is measured now and so takes no window.
func (p *parser) age(f map[string]*yaml.Node, e *Expr) error {
	s, err := p.str(f["age"], "age")
	if err != nil {
		return err
	}
	e.Signal = Signal(s)
	if !ages[e.Signal] {
		return p.errf(f["age"], fmt.Sprintf("unknown age %q; expected one of %s", s, signalList(ages)))
	}
	for _, k := range []string{"window", "short_window", "offset"} {
		if f[k] != nil {
			return p.errf(f[k], "an age is measured now; it takes no "+k)
		}
	}
	return nil
}

// threshold reads the expression's threshold: 'above', or 'burn_rate' with 'objective'
// for ratios, turned into the ratio they allow.
func (p *parser) threshold(n *yaml.Node, f map[string]*yaml.Node, e *Expr) error {
	var err error
	switch {
	case f["above"] != nil && (f["burn_rate"] != nil || f["objective"] != nil):
		return p.errf(f["above"], "give either 'above' or 'burn_rate' with 'objective', not both")
	case f["above"] != nil:
		if e.Form == FormAge {
			d, err := p.duration(f["above"], "above")
			if err != nil {
				return err
			}
			e.Threshold = d.Seconds()
		} else if e.Threshold, err = p.number(f["above"], "above"); err != nil {
			return err
		}
	case f["burn_rate"] != nil && f["objective"] != nil:
		if e.Form != FormRatio {
			return p.errf(f["burn_rate"], "burn_rate applies to ratios only")
		}
		if e.BurnRate, err = p.number(f["burn_rate"], "burn_rate"); err != nil {
			return err
		}
		if e.Objective, err = p.number(f["objective"], "objective"); err != nil {
			return err
		}
		if e.Objective <= 0 || e.Objective >= 1 {
			return p.errf(f["objective"], "objective must be between 0 and 1, e.g. 0.999")
		}
		// Rounded so 14.4 × (1 − 0.99) reads 0.144, not 0.14400000000000013, in exports.
		e.Threshold = math.Round(e.BurnRate*(1-e.Objective)*1e12) / 1e12
	default:
		return p.errf(n, "expr needs a threshold: 'above', or 'burn_rate' with 'objective'")
	}
	return nil
}

// by reads the labels to group by, each at most once.
func (p *parser) by(bn *yaml.Node, e *Expr) error {
	if bn.Kind != yaml.SequenceNode {
		return p.errf(bn, "'by' must be a list of tenant, kind, provider, api")
	}
	seen := map[string]bool{}
	for _, l := range bn.Content {
		if l.Value != LabelTenant && l.Value != LabelKind && l.Value != LabelProvider && l.Value != LabelAPI {
			return p.errf(l, fmt.Sprintf("cannot group by %q; expected tenant, kind, provider or api", l.Value))
		}
		if seen[l.Value] {
			return p.errf(l, fmt.Sprintf("%q is listed twice in 'by'", l.Value))
		}
		seen[l.Value] = true
		e.By = append(e.By, l.Value)
	}
	return nil
}

func windowedCounters() map[Signal]bool {
	out := map[Signal]bool{}
	for k := range windowed {
		if k != ChargeDifference {
			out[k] = true
		}
	}
	return out
}
