package alertstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// refusals records n client requests of the fixture's tenant of kind refused for reason,
// received evenly over [from, to).
func refusals(t *testing.T, f *fixture, kind ops.Kind, reason string, n int, from, to time.Time) {
	t.Helper()
	if _, err := f.DB.Pool.Exec(context.Background(), `
INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, reason, received_at, answered_at)
SELECT @tenant::bigint, @kind, 'refused-' || i, false, 'rejected', @reason, @from::timestamptz + i * @step::interval,
	@from::timestamptz + i * @step::interval
FROM generate_series(0, @n::int - 1) i`, pgx.NamedArgs{"tenant": f.Tenant, "kind": string(kind), "reason": reason,
		"from": from, "step": to.Sub(from) / time.Duration(n), "n": n}); err != nil {
		t.Fatal(err)
	}
}

// TestBudgetRefusalsAreCountedFromTheRollupsAsFromTheRawRows: the built-in rules read the
// requests refused because their tenant's LLM budget was spent, and those refused because
// what was left of it was too small for the call, as counted facts (ops rule 8), each apart,
// from the rollups for the minutes the rollup job settled and from the raw rows after its
// cut, with the raw rows' numbers: the gateway's and the job workers' refusals alike, and no
// refusal of another reason.
// ops rule 8
func TestBudgetRefusalsAreCountedFromTheRollupsAsFromTheRawRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := t0
	refusals(t, f, ops.KindLLMCall, llm.ReasonBudgetSpent, 7, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	refusals(t, f, ops.KindLLMJob, llm.ReasonBudgetSpent, 2, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	refusals(t, f, ops.KindLLMCall, llm.ReasonModelNotPriced, 4, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	refusals(t, f, ops.KindLLMCall, llm.ReasonBudgetTooSmall, 5, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	refusals(t, f, ops.KindLLMJob, llm.ReasonBudgetTooSmall, 1, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	roll := &recon.Rollups{Store: rollupstore.New(f.DB), Clock: ops.NewManualClock(now)}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("rollups: %+v %v", rep, err)
	}
	// Refusals after the pass, after its cut.
	refusals(t, f, ops.KindLLMCall, llm.ReasonBudgetSpent, 3, now.Add(5*time.Second), now.Add(40*time.Second))
	refusals(t, f, ops.KindLLMCall, llm.ReasonBudgetTooSmall, 2, now.Add(5*time.Second), now.Add(40*time.Second))
	to := now.Add(45 * time.Second)
	got, err := f.alerts.Counters(ctx, to.Add(-6*time.Hour), to)
	if err != nil {
		t.Fatal(err)
	}
	sig := sameAsRaw(t, f, got, to.Add(-6*time.Hour), to)
	for key, want := range map[string]float64{"acme/llm_call// budget_refusals": 7 + 3, "acme/llm_job// budget_refusals": 2,
		"acme/llm_call// budget_too_small_refusals": 5 + 2, "acme/llm_job// budget_too_small_refusals": 1,
		"acme/llm_call// client_requests": 7 + 4 + 5 + 3 + 2} {
		if sig[key] != want {
			t.Errorf("%s = %v, want %v (all %v)", key, sig[key], want, sig)
		}
	}
}

// TestMetricsSayWhyARequestWasRefused: on /metrics, settle_client_requests_total carries the
// reason of each refused request, which the exported TenantLLMBudgetSpent reads, so that
// Prometheus counts the same refusals as the built-in rules (ops rule 8); a request that was
// not refused has none.
func TestMetricsSayWhyARequestWasRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := alerts.NewCollector(f.alerts, f.Clock, nil)
	c.MinRefresh = 0
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	now := f.Clock.Now()
	refusals(t, f, ops.KindLLMCall, llm.ReasonBudgetSpent, 3, now, now.Add(3*time.Second))
	refusals(t, f, ops.KindLLMCall, llm.ReasonModelNotPriced, 1, now, now.Add(time.Second))
	if _, err := f.Seed().Open(context.Background(), f.Refund("paid-1", 100), "req-1", "w1"); err != nil {
		t.Fatal(err)
	}
	counterBy(t, reg, alerts.MetricClientRequests, "reason")
	f.Clock.Advance(2 * time.Minute)
	got := counterBy(t, reg, alerts.MetricClientRequests, "reason")
	if got[llm.ReasonBudgetSpent] != 3 || got[llm.ReasonModelNotPriced] != 1 || got[""] != 1 || len(got) != 3 {
		t.Fatalf("settle_client_requests_total by reason %v, want 3 %s, 1 %s and 1 request with none",
			got, llm.ReasonBudgetSpent, llm.ReasonModelNotPriced)
	}
	// Each exported rule of a budget's stop reads the reason the gateway gives, the one its
	// alerts are labelled with.
	reasons := map[string]bool{}
	for _, r := range alerts.DefaultRules().Rules() {
		if r.Alert != "TenantLLMBudgetSpent" {
			continue
		}
		reason := r.Labels["reason"]
		reasons[reason] = true
		if q := alerts.PromQL(r); !strings.Contains(q, `reason="`+reason+`"`) {
			t.Errorf("the exported TenantLLMBudgetSpent of reason %q reads %s, not the requests refused for it", reason, q)
		}
	}
	if !reasons[llm.ReasonBudgetSpent] || !reasons[llm.ReasonBudgetTooSmall] || len(reasons) != 2 {
		t.Errorf("TenantLLMBudgetSpent is told of the reasons %v, want %s and %s", reasons, llm.ReasonBudgetSpent, llm.ReasonBudgetTooSmall)
	}
}
