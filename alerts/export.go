package alerts

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// notAdmitted matches the answers of the client requests the admitted requests leave out:
// refused at the door, and every answer of a cancel (ops.Answer.Cancel).
const notAdmitted = "rejected|cancelled|cancel_too_late|cancel_failed|cancel_refused"

// budgetSpent and budgetTooSmall are the reasons of a request refused for its tenant's spent
// LLM budget, and for what is left of it being too small for the call (llm.ReasonBudgetSpent
// and llm.ReasonBudgetTooSmall, which this package does not import).
const (
	budgetSpent    = "tenant_budget_spent"
	budgetTooSmall = "llm_budget_too_small"
)

// promSelector is the series behind each signal in Settle's /metrics.
var promSelector = map[Signal]string{
	ClientRequests:       MetricClientRequests,
	AdmittedRequests:     MetricClientRequests + `{answer!~"` + notAdmitted + `"}`,
	DuplicateRequests:    MetricClientRequests + `{duplicate="true"}`,
	Replays:              MetricClientRequests + `{answer="replayed"}`,
	Attempts:             MetricAttempts + `{outcome!="not_sent"}`,
	Timeouts:             MetricAttempts + `{outcome="timeout"}`,
	Operations:           MetricOperationsCreated,
	Succeeded:            MetricOperationsClosed + `{status="succeeded"}`,
	ProviderCharges:      MetricProviderCharges,
	OrphanCharges:        MetricProviderCharges + `{orphan="true"}`,
	DoubleCharges:        MetricProviderCharges + `{double="true"}`,
	UnknownOperations:    MetricOperationsOpen + `{status="unknown"}`,
	ExpiredOperations:    MetricOperationsOpen + `{status="expired"}`,
	OldestUnknown:        MetricOldestOpenAge + `{status="unknown"}`,
	OldestExpired:        MetricOldestOpenAge + `{status="expired"}`,
	ReceivedOperations:   MetricOperationsOpen + `{status="received"}`,
	InProgressOperations: MetricOperationsOpen + `{status="in_progress"}`,
	OldestReceived:       MetricOldestOpenAge + `{status="received"}`,
	OldestInProgress:     MetricOldestOpenAge + `{status="in_progress"}`,
	FailedAfterSuccess:   MetricFailedAfterSuccess,
	PossibleDuplicates:   MetricPossibleDuplicates,
	BudgetRefusals:       MetricClientRequests + `{answer="rejected",reason="` + budgetSpent + `"}`,
	BudgetTooSmall:       MetricClientRequests + `{answer="rejected",reason="` + budgetTooSmall + `"}`,
}

// PromQL writes the rule's expression in PromQL over Settle's /metrics. Every replica
// exports the same counts read from the database, so each series is first reduced over
// the scraped instances with max, then summed by the rule's labels.
func PromQL(r *Rule) string {
	x := r.Expr
	by := "sum"
	if len(x.By) > 0 {
		by = "sum by (" + strings.Join(x.By, ", ") + ")"
	}
	increase := func(s Signal, w string) string {
		off := ""
		if x.Offset > 0 {
			off = " offset " + FormatDuration(x.Offset)
		}
		return fmt.Sprintf("%s (max without (instance, pod) (increase(%s[%s]%s)))", by, promSelector[s], w, off)
	}
	th := strconv.FormatFloat(x.Threshold, 'g', -1, 64)
	switch {
	case x.Form == FormRatio:
		w := FormatDuration(x.Window)
		q := fmt.Sprintf("(\n  %s\n/\n  %s\n) > %s", increase(x.Numerator, w), increase(x.Denominator, w), th)
		if x.MinRequests > 0 {
			q += fmt.Sprintf("\nand\n  %s >= %s", increase(x.Denominator, w), strconv.FormatFloat(x.MinRequests, 'g', -1, 64))
		}
		if x.ShortWindow > 0 {
			sw := FormatDuration(x.ShortWindow)
			q += fmt.Sprintf("\nand\n(\n  %s\n/\n  %s\n) > %s", increase(x.Numerator, sw), increase(x.Denominator, sw), th)
		}
		return q
	case x.Signal == ChargeDifference:
		w := FormatDuration(x.Window)
		return fmt.Sprintf("abs(\n  %s\n-\n  %s\n) > %s", increase(ProviderCharges, w), increase(Succeeded, w), th)
	case windowed[x.Signal]:
		return fmt.Sprintf("%s > %s", increase(x.Signal, FormatDuration(x.Window)), th)
	case ages[x.Signal]:
		agg := "max"
		if len(x.By) > 0 {
			agg = "max by (" + strings.Join(x.By, ", ") + ")"
		}
		return fmt.Sprintf("%s (%s) > %s", agg, promSelector[x.Signal], th)
	default:
		return fmt.Sprintf("%s (max without (instance, pod) (%s)) > %s", by, promSelector[x.Signal], th)
	}
}

type promFile struct {
	Groups []promGroup `yaml:"groups"`
}

type promGroup struct {
	Name     string     `yaml:"name"`
	Interval string     `yaml:"interval,omitempty"`
	Rules    []promRule `yaml:"rules"`
}

type promRule struct {
	Alert         string            `yaml:"alert"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// ExportPrometheus writes s as a Prometheus rules file. Annotations are copied as they
// are: Prometheus understands the same $labels and $value templates.
func ExportPrometheus(s *RuleSet, w io.Writer) error {
	var f promFile
	for _, g := range s.Groups {
		pg := promGroup{Name: g.Name, Interval: FormatDuration(g.Interval)}
		for _, r := range g.Rules {
			pr := promRule{Alert: r.Alert, Expr: PromQL(r), Labels: literalLabels(r.Labels), Annotations: r.Annotations}
			if r.For > 0 {
				pr.For = FormatDuration(r.For)
			}
			if r.KeepFiringFor > 0 {
				pr.KeepFiringFor = FormatDuration(r.KeepFiringFor)
			}
			pg.Rules = append(pg.Rules, pr)
		}
		f.Groups = append(f.Groups, pg)
	}
	fmt.Fprintf(w, "# Settle alert rules for Prometheus, exported from %s.\n", s.Source)
	fmt.Fprintf(w, "# They read Settle's /metrics; scrape every replica, the rules reduce them with max.\n")
	fmt.Fprintf(w, "# /metrics carries every tenant's figures: it answers loopback clients only, unless\n")
	fmt.Fprintf(w, "# SETTLE_METRICS_TOKEN is set (scrape with authorization: credentials_file) or\n")
	fmt.Fprintf(w, "# SETTLE_METRICS_ADDR is (scrape that port). docs/metrics.md has each job.\n")
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("write Prometheus rules: %w", err)
	}
	return enc.Close()
}

// literalLabels writes a rule's labels so that Prometheus, which expands a label's value as
// a template where Settle takes it as it is, reads the same text: every "{{" is a template
// printing "{{". Unescaped, one label holding "{{" made Prometheus refuse the whole file.
func literalLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return l
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = strings.ReplaceAll(v, "{{", `{{ "{{" }}`)
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
