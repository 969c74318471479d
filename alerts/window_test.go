package alerts

import (
	"errors"
	"strings"
	"testing"
)

// TestAWindowPastTheRollupsIsRefusedAtLoad: a window the ledger's counts cannot be read over
// in one go (MaxWindow, 93 days) would load and then fail at every evaluation, so the rule
// never judges anything. The file is refused at load instead, naming the rule, the line of
// its window and the longest window allowed; 93 days itself loads.
func TestAWindowPastTheRollupsIsRefusedAtLoad(t *testing.T) {
	rule := func(expr string) string {
		return "groups:\n  - name: g\n    rules:\n      - alert: Quiet\n        expr: {count: unknown_operations, above: 1}\n" +
			"      - alert: SlowBurn\n        expr:\n" + expr
	}
	for _, c := range []struct{ name, expr string }{
		{"ratio", "          ratio: timeouts / attempts\n          window: 94d\n          above: 0.1\n"},
		{"count", "          count: orphan_charges\n          window: 14w\n          above: 0\n"},
		{"hours", "          ratio: timeouts / attempts\n          window: 2233h\n          above: 0.1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := Parse("rules.yaml", []byte(rule(c.expr)))
			var pe *ParseError
			if !errors.As(err, &pe) {
				if set != nil {
					for _, r := range set.Rules() {
						t.Logf("loaded %s with a window of %s", r.Alert, FormatDuration(r.Expr.Window))
					}
				}
				t.Fatalf("error %v, want a ParseError", err)
			}
			if pe.Line != 9 || !strings.Contains(pe.Reason, "SlowBurn") || !strings.Contains(pe.Reason, "93d") {
				t.Fatalf("%v, want line 9 naming rule SlowBurn and the longest window, 93d", err)
			}
		})
	}
	if _, err := Parse("rules.yaml", []byte(rule("          ratio: timeouts / attempts\n          window: 93d\n          above: 0.1\n"))); err != nil {
		t.Fatalf("a window of 93 days: %v, want it loaded", err)
	}
}
