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
	ClientRequests Signal = "client_requests"
	// AdmittedRequests counts the client requests that asked for a paid side effect: all
	// but those refused at the door and the cancels of background responses. It is the
	// duplicate rate's denominator, as /insights counts it.
	AdmittedRequests  Signal = "admitted_requests"
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
	// PossibleDuplicates counts the LLM attempts that followed an uncertain send of the same
	// operation (finished in the window): each may have been billed a second time, since LLM
	// providers take no idempotency key.
	PossibleDuplicates Signal = "possible_duplicate_attempts"
	// BudgetRefusals counts the client requests refused because their tenant's LLM budget
	// of the UTC day was spent (429 tenant_budget_spent): the gateway's calls and resends,
	// and the jobs a worker held back. For that tenant's customers each is an outage.
	BudgetRefusals Signal = "budget_refusals"
	// BudgetTooSmall counts the client requests refused because what was left of their
	// tenant's LLM budget of the UTC day could not pay for their worst case (429
	// llm_budget_too_small): the gateway's new calls and the jobs a worker held back. One
	// among calls that went through is a client's oversize call; most of a tenant's requests
	// refused so is a tenant whose calls all ask more than is left, as stopped as a spent one.
	BudgetTooSmall Signal = "budget_too_small_refusals"
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
	// FailedAfterSuccess counts the open exceptions of refunds the provider accepted and
	// failed later: customers told their refund was on its way who got nothing.
	FailedAfterSuccess Signal = "failed_after_success"
)

var windowed = map[Signal]bool{ClientRequests: true, AdmittedRequests: true, DuplicateRequests: true, Replays: true, Attempts: true,
	Timeouts: true, Operations: true, Succeeded: true, ProviderCharges: true, OrphanCharges: true,
	DoubleCharges: true, ChargeDifference: true, PossibleDuplicates: true, BudgetRefusals: true,
	BudgetTooSmall: true}

var backlog = map[Signal]bool{UnknownOperations: true, ExpiredOperations: true, ReceivedOperations: true,
	InProgressOperations: true, FailedAfterSuccess: true}

var ages = map[Signal]bool{OldestUnknown: true, OldestExpired: true, OldestReceived: true, OldestInProgress: true}

// Labels by which a rule may group its instances.
const (
	LabelTenant   = "tenant"
	LabelKind     = "kind"
	LabelProvider = "provider"
	// LabelAPI is the API an LLM operation called (chat_completions, responses, ...); empty
	// for an operation that called none.
	LabelAPI = "api"
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
		if m[i+1] == "" {
			continue
		}
		// A sum past the clock's range would wrap round to a negative or small span (or, with
		// digits past int64, be read as 0): a window that reads nothing, a 'for' that fires
		// at once.
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(maxDuration-d)/int64(u) {
			return 0, fmt.Errorf("%q is too long; the longest duration is %s", s, FormatDuration(maxDuration))
		}
		d += time.Duration(n) * u
	}
	return d, nil
}

// MaxWindow is the longest window a rule may count over: the evaluator reads a window's
// counts from the ledger's hourly rollups in one read, and a read holds at most 93 days of
// hours per group (ops/pg/rollupstore). A longer window would load and then fail at every
// evaluation, so the rule would never judge anything.
const MaxWindow = 93 * 24 * time.Hour

// maxDuration is the longest span time.Duration holds, about 292 years.
const maxDuration = time.Duration(math.MaxInt64)

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
