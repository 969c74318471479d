package alerts

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultRulesCoverTheProduct(t *testing.T) {
	set := DefaultRules()
	names := map[string]bool{}
	for _, r := range set.Rules() {
		names[r.Alert] = true
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook_url"] == "" {
			t.Errorf("%s: needs a severity, a summary and a runbook URL", r.Key())
		}
	}
	for _, n := range []string{"DuplicateRequestRateHigh", "TimeoutRateHigh", "DoubleChargeDetected", "UnknownBacklogHigh",
		"UnknownTooOld", "ExpiredUnresolved", "ProviderChargeMismatch", "LLMDoubleBillingSuspected", "TenantLLMBudgetSpent"} {
		if !names[n] {
			t.Errorf("default rule %s is missing", n)
		}
	}
	// Every rule's runbook_url names its own section of the runbooks page, and the section
	// is there.
	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set.Rules() {
		want := "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
	}
	for n := range names {
		if !strings.Contains(string(runbooks), "\n## "+n+"\n") {
			t.Errorf("docs/runbooks.md has no section for %s", n)
		}
	}
	// The SRE workbook's pairs for a 30-day objective.
	var pairs []string
	for _, r := range set.Rules() {
		if r.Alert == "TimeoutRateHigh" {
			pairs = append(pairs, FormatDuration(r.Expr.Window)+"/"+FormatDuration(r.Expr.ShortWindow))
			if want := r.Expr.BurnRate * 0.01; math.Abs(r.Expr.Threshold-want) > 1e-12 {
				t.Errorf("threshold %v, want %v", r.Expr.Threshold, want)
			}
		}
	}
	if strings.Join(pairs, " ") != "1h/5m 6h/30m" {
		t.Errorf("burn-rate windows %v", pairs)
	}
}

func TestLoadWithoutAPathGivesTheDefaults(t *testing.T) {
	set, err := Load("")
	if err != nil || set.Source != "built-in defaults" {
		t.Fatalf("%v %v", set, err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, DefaultRulesYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err = Load(path)
	if err != nil || len(set.Rules()) != len(DefaultRules().Rules()) {
		t.Fatalf("loading the defaults from a file: %v", err)
	}
}

func TestMalformedRulesStopWithFileLineAndReason(t *testing.T) {
	head := "groups:\n  - name: g\n    rules:\n"
	cases := []struct {
		name, body string
		line       int
		reason     string
	}{
		{"syntax", head + "      - alert: \"A\n", 4, "end of stream"},
		{"no groups", "rules: []\n", 1, `unknown field "rules"`},
		{"unknown field", head + "      - alert: A\n        expr: {count: unknown_operations, above: 1}\n        fro: 5m\n", 6, `unknown field "fro"`},
		{"bad duration", head + "      - alert: A\n        expr: {count: unknown_operations, above: 1}\n        for: soon\n", 6, "for:"},
		{"unknown signal", head + "      - alert: A\n        expr:\n          count: widgets\n          above: 1\n", 6, `unknown count "widgets"`},
		{"bad ratio", head + "      - alert: A\n        expr:\n          ratio: timeouts attempts\n          window: 1h\n          above: 1\n", 6, "numerator / denominator"},
		{"ratio without window", head + "      - alert: A\n        expr:\n          ratio: timeouts / attempts\n          above: 1\n", 6, "needs a 'window'"},
		{"short not shorter", head + "      - alert: A\n        expr:\n          ratio: timeouts / attempts\n          window: 5m\n          short_window: 1h\n          above: 1\n", 8, "shorter"},
		{"no threshold", head + "      - alert: A\n        expr:\n          count: unknown_operations\n", 6, "threshold"},
		{"bad by", head + "      - alert: A\n        expr:\n          count: unknown_operations\n          above: 1\n          by: [tenant, region]\n", 8, `"region"`},
		{"bad template", head + "      - alert: A\n        expr: {count: unknown_operations, above: 1}\n        annotations:\n          summary: \"{{ $value \"\n", 7, "annotation summary"},
		{"reserved label", head + "      - alert: A\n        expr: {count: unknown_operations, above: 1}\n        labels: {tenant: x}\n", 6, `"tenant"`},
		{"duplicate rule", head + "      - alert: A\n        expr: {count: unknown_operations, above: 1}\n      - alert: A\n        expr: {count: expired_operations, above: 1}\n", 6, "line 4"},
		{"objective", head + "      - alert: A\n        expr:\n          ratio: timeouts / attempts\n          window: 1h\n          burn_rate: 14.4\n          objective: 99.9\n", 9, "between 0 and 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("rules.yaml", []byte(c.body))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a ParseError", err)
			}
			if pe.File != "rules.yaml" || pe.Line != c.line || !strings.Contains(pe.Reason, c.reason) {
				t.Fatalf("got %q, want rules.yaml:%d: ...%s...", err, c.line, c.reason)
			}
			if !strings.HasPrefix(err.Error(), "rules.yaml:") {
				t.Fatalf("message %q does not start with file:line", err)
			}
		})
	}
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"5m": 5 * time.Minute, "1d": 24 * time.Hour, "1h30m": 90 * time.Minute,
		"1h0m0s": time.Hour, "2w": 14 * 24 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "-5m", "5 minutes"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	if s := FormatDuration(36*time.Hour + 30*time.Minute); s != "1d12h30m" {
		t.Errorf("FormatDuration = %s", s)
	}
}
