package alertstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
)

// TestTheLongestWindowIsReadAndOnePastItFailsAlone: alerts.MaxWindow, the longest window a
// rules file may give, is one the ledger's counts can be read over; past it the read fails.
// A rule past it that was loaded anyway (by a version that did not refuse it) fails alone:
// the other rules of its group are still evaluated and judged.
func TestTheLongestWindowIsReadAndOnePastItFailsAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := f.Clock.Now()
	if _, err := f.alerts.Counters(ctx, now.Add(-alerts.MaxWindow), now); err != nil {
		t.Fatalf("counting over alerts.MaxWindow: %v, want the window read", err)
	}
	if _, err := f.alerts.Counters(ctx, now.Add(-alerts.MaxWindow-time.Hour), now); err == nil {
		t.Fatalf("counting over alerts.MaxWindow and an hour more: read, so the limit of the rules is not the store's")
	}

	rig := newAlertRig(t, f, `
groups:
  - name: test
    interval: 1m
    rules:
      - alert: SlowBurn
        expr: {count: orphan_charges, window: 93d, above: 0}
      - alert: UnknownBacklog
        expr: {count: unknown_operations, above: 0, by: [tenant, kind]}
`, nil)
	rig.ev.Rules.Groups[0].Rules[0].Expr.Window = alerts.MaxWindow + 24*time.Hour
	f.ToUnknown(t, "w-1")
	res := rig.evaluate(t)
	if res.Evaluated != 2 || res.Errors != 1 {
		t.Fatalf("pass %+v, want both rules evaluated and one error", res)
	}
	st, err := f.alerts.AlertRuleStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	health := map[string]alerts.Health{}
	for _, s := range st {
		health[s.Alert] = s.Health
	}
	if health["SlowBurn"] != alerts.HealthError || health["UnknownBacklog"] != alerts.HealthOK {
		t.Fatalf("rule health %v, want SlowBurn in error and UnknownBacklog judged", health)
	}
	if ins, err := f.alerts.AlertInstances(ctx); err != nil || len(ins) != 1 || ins[0].Alert != "UnknownBacklog" {
		t.Fatalf("instances %+v (%v), want UnknownBacklog's for the unknown operation", ins, err)
	}
}
