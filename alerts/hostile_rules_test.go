package alerts

import (
	"errors"
	"strings"
	"testing"
)

// TestHostileRuleValuesAreRefused: a threshold that is not a finite number, or a duration
// too large for the evaluator's clock, is refused at load with the file and line, rather
// than loaded as a rule that can never fire (v > NaN and v > +Inf are always false), fires
// at once (a 'for' that wrapped round to a negative span), or reads an empty window (a
// window that wrapped round, or whose digits overflowed and were read as 0), and the
// group interval of 30501w, read as about three days, is refused too.
func TestHostileRuleValuesAreRefused(t *testing.T) {
	head := "groups:\n  - name: g\n    rules:\n      - alert: A\n"
	ratio := func(extra string) string {
		return head + "        expr:\n          ratio: timeouts / attempts\n          window: 1h\n" + extra
	}
	cases := []struct{ name, body, reason string }{
		{"NaN threshold", ratio("          above: NaN\n"), "finite"},
		{"Inf threshold", ratio("          above: Inf\n"), "finite"},
		{"-Inf threshold", head + "        expr: {count: unknown_operations, above: -Inf}\n", "finite"},
		{"NaN burn rate", ratio("          burn_rate: NaN\n          objective: 0.99\n"), "finite"},
		{"NaN objective", ratio("          burn_rate: 14.4\n          objective: NaN\n"), "objective"},
		{"NaN min_requests", ratio("          above: 0.1\n          min_requests: NaN\n"), "finite"},
		{"wrapped for", head + "        expr: {count: unknown_operations, above: 1}\n        for: 300000w\n", "too long"},
		{"wrapped window", head + "        expr:\n          ratio: timeouts / attempts\n          window: 16000000d\n          above: 0.1\n", "too long"},
		{"overflowed digits", head + "        expr: {count: unknown_operations, above: 1}\n        for: 99999999999999999999d\n", "too long"},
		{"wrapped interval", "groups:\n  - name: g\n    interval: 30501w\n    rules:\n      - alert: A\n        expr: {count: unknown_operations, above: 1}\n", "too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := Parse("rules.yaml", []byte(c.body))
			var pe *ParseError
			if !errors.As(err, &pe) {
				if set != nil {
					for _, r := range set.Rules() {
						t.Logf("loaded %s: threshold %v, window %v, for %v", r.Alert, r.Expr.Threshold, r.Expr.Window, r.For)
					}
				}
				t.Fatalf("error %v, want a ParseError", err)
			}
			if !strings.Contains(pe.Reason, c.reason) {
				t.Fatalf("reason %q, want ...%s...", pe.Reason, c.reason)
			}
		})
	}
}
