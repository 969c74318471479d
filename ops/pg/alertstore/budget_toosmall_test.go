package alertstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// requestsAt records n client requests of tenant, of kind, answered answer for reason (""
// for none), received evenly over [from, to).
func requestsAt(t *testing.T, f *fixture, tenant int64, kind ops.Kind, answer, reason string, n int, from, to time.Time) {
	t.Helper()
	if _, err := f.DB.Pool.Exec(context.Background(), `
INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, reason, received_at, answered_at)
SELECT @tenant::bigint, @kind, @ref || i, false, @answer, nullif(@reason, ''), @from::timestamptz + i * @step::interval,
	@from::timestamptz + i * @step::interval
FROM generate_series(0, @n::int - 1) i`, pgx.NamedArgs{"tenant": tenant, "kind": string(kind), "answer": answer, "reason": reason,
		"ref": answer + "-" + reason + "-" + from.Format(time.RFC3339) + "-", "from": from, "step": to.Sub(from) / time.Duration(n), "n": n}); err != nil {
		t.Fatal(err)
	}
}

// TestABusyTenantStoppedByWhatIsLeftIsToldWithinTwoMinutes is the attack of a tenant whose
// client made 10 calls a second for nine minutes and whose every call from now on is refused
// with llm_budget_too_small: judged over ten minutes, its refusals stayed under half of its
// requests for minutes of a stop its customers already see. The built-in rule, reading the
// ledger's counts (ops rule 8), fires for it within two minutes of the stop; cafe, as busy,
// whose one oversize call among calls that go through is refused, pages nobody.
// ops rule 8
func TestABusyTenantStoppedByWhatIsLeftIsToldWithinTwoMinutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cafe, err := f.DB.EnsureTenant(ctx, "cafe")
	if err != nil {
		t.Fatal(err)
	}
	stop := f.Clock.Now()
	requestsAt(t, f, f.Tenant, ops.KindLLMCall, "new", "", 9*60*10, stop.Add(-9*time.Minute), stop)
	requestsAt(t, f, f.Tenant, ops.KindLLMCall, "rejected", llm.ReasonBudgetTooSmall, 3*60*10, stop, stop.Add(3*time.Minute))
	requestsAt(t, f, cafe.ID, ops.KindLLMCall, "new", "", 12*60*10, stop.Add(-9*time.Minute), stop.Add(3*time.Minute))
	requestsAt(t, f, cafe.ID, ops.KindLLMCall, "rejected", llm.ReasonBudgetTooSmall, 1, stop.Add(30*time.Second), stop.Add(31*time.Second))

	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: f.alerts, Store: f.alerts, Clock: f.Clock}
	var told time.Duration
	for since := time.Duration(0); since <= 3*time.Minute; since += 30 * time.Second {
		f.Clock.Set(stop.Add(since))
		if _, err := ev.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		got := alertstest.BudgetStops(t, f.alerts)
		if got["cafe"] != "" {
			t.Fatalf("%s after cafe's one oversize call among calls sent: TenantLLMBudgetSpent %v; want nothing for cafe", since, got)
		}
		if got["acme"] != "" && told == 0 {
			told = since
		}
	}
	if told == 0 || told > 2*time.Minute {
		t.Errorf("acme, refused on every call since its stop after nine busy minutes, was told %s after it (0: never within 3 min); want within 2 min", told)
	}
}
