package alerts

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"
)

// Signal names one number the evaluator reads from the ledger. Windowed signals count
// recorded rows in a time window (ops rule 8: facts, not estimates); the others describe the
// backlog as it is now.
type Signal string

// The windowed signals: counts of rows recorded in a window.
const (
	ClientRequests    Signal = "client_requests"
	DuplicateRequests Signal = "duplicate_requests"
	Replays           Signal = "replays"
	Attempts          Signal = "attempts"
	Timeouts          Signal = "timeouts"
	Operations        Signal = "operations"
	Succeeded         Signal = "succeeded"
	ProviderCharges   Signal = "provider_charges"
	OrphanCharges     Signal = "orphan_charges"
	DoubleCharges     Signal = "double_charges"
	// ChargeDifference is |provider charges - succeeded operations| in a window: zero when
	// every succeeded operation was billed exactly once and nothing else was billed.
	ChargeDifference Signal = "charge_difference"
)

// The backlog signals: what is open now.
const (
	UnknownOperations    Signal = "unknown_operations"
	ExpiredOperations    Signal = "expired_operations"
	ReceivedOperations   Signal = "received_operations"
	InProgressOperations Signal = "in_progress_operations"
	// The ages in seconds of the oldest operation in each open status.
	OldestUnknown    Signal = "oldest_unknown"
	OldestExpired    Signal = "oldest_expired"
	OldestReceived   Signal = "oldest_received"
	OldestInProgress Signal = "oldest_in_progress"
)

var windowed = map[Signal]bool{ClientRequests: true, DuplicateRequests: true, Replays: true, Attempts: true,
	Timeouts: true, Operations: true, Succeeded: true, ProviderCharges: true, OrphanCharges: true,
	DoubleCharges: true, ChargeDifference: true}

var backlog = map[Signal]bool{UnknownOperations: true, ExpiredOperations: true, ReceivedOperations: true,
	InProgressOperations: true}

var ages = map[Signal]bool{OldestUnknown: true, OldestExpired: true, OldestReceived: true, OldestInProgress: true}

// Labels by which a rule may group its instances.
const (
	LabelTenant   = "tenant"
	LabelKind     = "kind"
	LabelProvider = "provider"
)

// Form is the shape of a rule's expression: the product's needs, not a general language.
type Form string

// The expression forms.
const (
	// FormRatio compares numerator/denominator over a window, and optionally over a short
	// window too (multi-window burn rate).
	FormRatio Form = "ratio"
	// FormCount compares a count: of rows in a window for windowed signals, of open
	// operations now for backlog signals.
	FormCount Form = "count"
	// FormAge compares the age of the oldest operation in a status.
	FormAge Form = "age"
)

// Expr is a rule's condition.
type Expr struct {
	Form Form
	// Signal is what count and age read; Numerator and Denominator are what ratio reads.
	Signal      Signal
	Numerator   Signal
	Denominator Signal
	// Window is the long window; ShortWindow, when set, must exceed the threshold as well.
	Window      time.Duration
	ShortWindow time.Duration
	// Offset moves the windows back, to judge a closed window the reconciler has seen.
	Offset time.Duration
	// Threshold is what the value must exceed. BurnRate and Objective, when given, set it
	// to BurnRate × (1 − Objective), as in the Google SRE workbook.
	Threshold float64
	BurnRate  float64
	Objective float64
	// MinRequests is the denominator below which a ratio stays quiet: nobody is paged for
	// three requests at 3 a.m.
	MinRequests float64
	// By lists the grouping labels; each distinct combination is its own alert instance.
	By []string
}

// Rule is one alerting rule, shaped like a Prometheus alerting rule.
type Rule struct {
	Alert         string
	Expr          Expr
	For           time.Duration
	KeepFiringFor time.Duration
	Labels        map[string]string
	Annotations   map[string]string
	// Group names the rule's group; Line is where the rule starts in its file.
	Group string
	Line  int
}

// Key names the rule among all rules: group, alert name and its own labels.
func (r *Rule) Key() string {
	return r.Group + "/" + r.Alert + labelString(r.Labels)
}

// Group is a named set of rules evaluated together every Interval.
type Group struct {
	Name     string
	Interval time.Duration
	Rules    []*Rule
}

// RuleSet is a parsed rules file.
type RuleSet struct {
	// Source is the file name the rules came from, or "built-in defaults".
	Source string
	Groups []*Group
}

// Rules lists every rule in file order.
func (s *RuleSet) Rules() []*Rule {
	var out []*Rule
	for _, g := range s.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// DefaultInterval is a group's evaluation interval when the file gives none.
const DefaultInterval = time.Minute

// ParseError is a mistake in a rules file, with where it is.
type ParseError struct {
	File   string
	Line   int
	Reason string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

//go:embed default_rules.yaml
var defaultRulesYAML []byte

// DefaultRulesYAML returns the built-in rules file, for people to copy and edit.
func DefaultRulesYAML() []byte { return append([]byte(nil), defaultRulesYAML...) }

// DefaultRules returns the built-in rules used when SETTLE_ALERT_RULES is unset.
func DefaultRules() *RuleSet {
	s, err := Parse("built-in defaults", defaultRulesYAML)
	if err != nil {
		// The defaults are part of the binary and covered by tests.
		panic(err)
	}
	return s
}

// Load reads the rules file at path; an empty path means the built-in defaults.
func Load(path string) (*RuleSet, error) {
	if path == "" {
		return DefaultRules(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read alert rules: %w", err)
	}
	return Parse(path, b)
}

// Parse reads a rules file. Every mistake is reported with the file, line and reason.
func Parse(file string, data []byte) (*RuleSet, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(file, err)
	}
	p := &parser{file: file}
	set := &RuleSet{Source: file}
	if len(doc.Content) == 0 {
		return nil, &ParseError{File: file, Line: 1, Reason: "the file is empty; expected a 'groups:' list"}
	}
	root := doc.Content[0]
	fields, err := p.mapping(root, "the file", "groups")
	if err != nil {
		return nil, err
	}
	gs := fields["groups"]
	if gs == nil {
		return nil, p.errf(root, "missing 'groups:'")
	}
	if gs.Kind != yaml.SequenceNode {
		return nil, p.errf(gs, "'groups' must be a list")
	}
	names := map[string]bool{}
	keys := map[string]int{}
	for _, gn := range gs.Content {
		g, err := p.group(gn)
		if err != nil {
			return nil, err
		}
		if names[g.Name] {
			return nil, p.errf(gn, fmt.Sprintf("group %q is defined twice", g.Name))
		}
		names[g.Name] = true
		for _, r := range g.Rules {
			if prev, ok := keys[r.Key()]; ok {
				return nil, &ParseError{File: file, Line: r.Line, Reason: fmt.Sprintf("rule %s has the same name and labels as the rule on line %d", r.Alert, prev)}
			}
			keys[r.Key()] = r.Line
		}
		set.Groups = append(set.Groups, g)
	}
	if len(set.Groups) == 0 {
		return nil, p.errf(gs, "'groups' is empty")
	}
	return set, nil
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns a yaml.v3 syntax error into a ParseError with its line.
func yamlError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &ParseError{File: file, Line: n, Reason: m[2]}
	}
	return &ParseError{File: file, Line: 1, Reason: msg}
}

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
	if r.For, err = p.duration(f["for"], "for"); err != nil {
		return nil, err
	}
	if r.KeepFiringFor, err = p.duration(f["keep_firing_for"], "keep_firing_for"); err != nil {
		return nil, err
	}
	if r.Labels, err = p.stringMap(f["labels"], "labels"); err != nil {
		return nil, err
	}
	for _, l := range []string{"alertname", LabelTenant, LabelKind, LabelProvider} {
		if _, ok := r.Labels[l]; ok {
			return nil, p.errf(f["labels"], fmt.Sprintf("label %q is set by the evaluator and cannot be given", l))
		}
	}
	if r.Annotations, err = p.stringMap(f["annotations"], "annotations"); err != nil {
		return nil, err
	}
	for k, v := range r.Annotations {
		if _, err := newTemplate(k, v); err != nil {
			return nil, p.errf(annotationNode(f["annotations"], k), fmt.Sprintf("annotation %s: %v", k, err))
		}
	}
	return r, nil
}

func annotationNode(m *yaml.Node, key string) *yaml.Node {
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
		s, err := p.str(f["ratio"], "ratio")
		if err != nil {
			return e, err
		}
		num, den, ok := strings.Cut(s, "/")
		e.Numerator, e.Denominator = Signal(strings.TrimSpace(num)), Signal(strings.TrimSpace(den))
		if !ok || !windowed[e.Numerator] || !windowed[e.Denominator] || e.Numerator == ChargeDifference || e.Denominator == ChargeDifference {
			return e, p.errf(f["ratio"], fmt.Sprintf("ratio must be 'numerator / denominator' of counters (%s)", signalList(windowedCounters())))
		}
		if e.Window == 0 {
			return e, p.errf(n, "a ratio needs a 'window'")
		}
		if e.ShortWindow >= e.Window {
			return e, p.errf(f["short_window"], "short_window must be shorter than window")
		}
	case FormCount:
		s, err := p.str(f["count"], "count")
		if err != nil {
			return e, err
		}
		e.Signal = Signal(s)
		switch {
		case windowed[e.Signal]:
			if e.Window == 0 {
				return e, p.errf(n, fmt.Sprintf("counting %s needs a 'window'", s))
			}
		case backlog[e.Signal]:
			if f["window"] != nil || f["offset"] != nil {
				return e, p.errf(f["count"], fmt.Sprintf("%s is counted as it is now; it takes no window or offset", s))
			}
		default:
			all := map[Signal]bool{}
			for k := range windowed {
				all[k] = true
			}
			for k := range backlog {
				all[k] = true
			}
			return e, p.errf(f["count"], fmt.Sprintf("unknown count %q; expected one of %s", s, signalList(all)))
		}
		if f["short_window"] != nil {
			return e, p.errf(f["short_window"], "short_window applies to ratios only")
		}
	case FormAge:
		s, err := p.str(f["age"], "age")
		if err != nil {
			return e, err
		}
		e.Signal = Signal(s)
		if !ages[e.Signal] {
			return e, p.errf(f["age"], fmt.Sprintf("unknown age %q; expected one of %s", s, signalList(ages)))
		}
		for _, k := range []string{"window", "short_window", "offset"} {
			if f[k] != nil {
				return e, p.errf(f[k], "an age is measured now; it takes no "+k)
			}
		}
	}
	if f["min_requests"] != nil {
		if e.Form != FormRatio {
			return e, p.errf(f["min_requests"], "min_requests applies to ratios only")
		}
		if e.MinRequests, err = p.number(f["min_requests"], "min_requests"); err != nil {
			return e, err
		}
	}
	switch {
	case f["above"] != nil && (f["burn_rate"] != nil || f["objective"] != nil):
		return e, p.errf(f["above"], "give either 'above' or 'burn_rate' with 'objective', not both")
	case f["above"] != nil:
		if e.Form == FormAge {
			d, err := p.duration(f["above"], "above")
			if err != nil {
				return e, err
			}
			e.Threshold = d.Seconds()
		} else if e.Threshold, err = p.number(f["above"], "above"); err != nil {
			return e, err
		}
	case f["burn_rate"] != nil && f["objective"] != nil:
		if e.Form != FormRatio {
			return e, p.errf(f["burn_rate"], "burn_rate applies to ratios only")
		}
		if e.BurnRate, err = p.number(f["burn_rate"], "burn_rate"); err != nil {
			return e, err
		}
		if e.Objective, err = p.number(f["objective"], "objective"); err != nil {
			return e, err
		}
		if e.Objective <= 0 || e.Objective >= 1 {
			return e, p.errf(f["objective"], "objective must be between 0 and 1, e.g. 0.999")
		}
		// Rounded so 14.4 × (1 − 0.99) reads 0.144, not 0.14400000000000013, in exports.
		e.Threshold = math.Round(e.BurnRate*(1-e.Objective)*1e12) / 1e12
	default:
		return e, p.errf(n, "expr needs a threshold: 'above', or 'burn_rate' with 'objective'")
	}
	if bn := f["by"]; bn != nil {
		if bn.Kind != yaml.SequenceNode {
			return e, p.errf(bn, "'by' must be a list of tenant, kind, provider")
		}
		seen := map[string]bool{}
		for _, l := range bn.Content {
			if l.Value != LabelTenant && l.Value != LabelKind && l.Value != LabelProvider {
				return e, p.errf(l, fmt.Sprintf("cannot group by %q; expected tenant, kind or provider", l.Value))
			}
			if seen[l.Value] {
				return e, p.errf(l, fmt.Sprintf("%q is listed twice in 'by'", l.Value))
			}
			seen[l.Value] = true
			e.By = append(e.By, l.Value)
		}
	}
	return e, nil
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

// ParseDuration reads a duration as Prometheus writes them (30s, 5m, 1h30m, 1d, 1w) or as
// Go does (1h0m0s).
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return d, nil
	}
	m := promDurationRE.FindStringSubmatch(s)
	if m == nil || s == "" {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m, 1h or 1d", s)
	}
	units := []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second}
	var d time.Duration
	for i, u := range units {
		if m[i+1] != "" {
			n, _ := strconv.Atoi(m[i+1])
			d += time.Duration(n) * u
		}
	}
	return d, nil
}

var promDurationRE = regexp.MustCompile(`^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$`)

// FormatDuration writes d the way Prometheus reads it: 1h30m, 5m, 1d.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.s)
			d -= n * u.d
		}
	}
	if d > 0 {
		fmt.Fprintf(&b, "%dms", d/time.Millisecond)
	}
	return b.String()
}

// newTemplate parses an annotation the way Prometheus does: $labels and $value are
// defined, with the humanize functions people use in Prometheus rules.
func newTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=zero").Funcs(templateFuncs).
		Parse("{{$labels := .Labels}}{{$value := .Value}}" + text)
}

var templateFuncs = template.FuncMap{
	"humanize": func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) },
	"humanizePercentage": func(v float64) string {
		return strconv.FormatFloat(v*100, 'g', 4, 64) + "%"
	},
	"humanizeDuration": func(v float64) string {
		return time.Duration(v * float64(time.Second)).Round(time.Second).String()
	},
	"printf": fmt.Sprintf,
}

// expand fills an annotation's template; a failure shows in the text rather than hiding it.
func expand(name, text string, labels map[string]string, value float64) string {
	t, err := newTemplate(name, text)
	if err != nil {
		return text
	}
	var b strings.Builder
	if err := t.Execute(&b, struct {
		Labels map[string]string
		Value  float64
	}{labels, value}); err != nil {
		return fmt.Sprintf("%s (template error: %v)", text, err)
	}
	return b.String()
}

// labelString writes labels as {a="1", b="2"} in name order; empty for none.
func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}
