package alertstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// llmCall opens an llm_call operation of tenant and sends it: a first attempt that times
// out, then, when resend is set, a second one the ledger flags as a possible duplicate that
// succeeds with a generation costing costMicros.
func (f *fixture) llmCall(t *testing.T, tenant int64, key string, resend bool, costMicros int64) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.Seed().Open(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key,
		Fingerprint: "fp-" + key, Request: []byte(`{"body":{"model":"m"}}`), Retention: 24 * time.Hour}, "req-"+key, "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.Seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
	if err != nil || !resend {
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	op, a, err := f.Seed().BeginAttempt(ctx, op, "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err = f.Seed().Finish(ctx, op, a, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK, PossibleDuplicate: true,
		CostMicros: &costMicros, Result: &ops.Result{ProviderRef: "chatcmpl-" + key, Body: []byte(`{"id":"chatcmpl-` + key + `"}`),
			CostMicros: costMicros}})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusSucceeded {
		t.Fatalf("status %s, want succeeded", op.Status)
	}
	return op
}

// firing returns the label sets of alert's firing instances.
func firing(t *testing.T, f *fixture, alert string) []map[string]string {
	t.Helper()
	ins, err := f.alerts.AlertInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, in := range ins {
		if in.Alert == alert && in.State == alerts.StateFiring {
			out = append(out, in.Labels)
		}
	}
	return out
}

// Resends after uncertain LLM sends are a counter on /metrics and, past the burn rate with
// enough attempts, the LLMDoubleBillingSuspected page; one resend on a quiet tenant pages
// nobody.
func TestPossibleDuplicatesFeedTheirCounterAndTheDoubleBillingRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var quiet int64
	if err := f.DB.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('quiet') RETURNING id`).Scan(&quiet); err != nil {
		t.Fatal(err)
	}
	from := f.Clock.Now()
	// acme: 12 calls, each a timeout and a resend: 24 attempts, half of them possible duplicates.
	for i := range 12 {
		f.llmCall(t, f.Tenant, fmt.Sprintf("busy-%d", i), true, 2000)
	}
	// quiet: one call resent once.
	f.llmCall(t, quiet, "quiet-1", true, 2000)
	f.Clock.Advance(time.Second)

	tallies, err := f.alerts.Tally(ctx, from, f.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	dups := map[string]float64{}
	for _, tl := range tallies {
		if tl.Metric == alerts.MetricPossibleDuplicates {
			if tl.Labels["kind"] != "llm_call" || tl.Labels["provider"] != "openai" {
				t.Errorf("tally labels %v", tl.Labels)
			}
			dups[tl.Labels["tenant"]] += tl.N
		}
	}
	if dups["acme"] != 12 || dups["quiet"] != 1 {
		t.Fatalf("possible duplicates on /metrics %v, want acme 12 and quiet 1", dups)
	}

	rig := newAlertRig(t, f, string(alerts.DefaultRulesYAML()), nil)
	rig.evaluate(t)
	f.Clock.Advance(3 * time.Minute) // past the rule's for: 2m
	rig.evaluate(t)
	got := firing(t, f, "LLMDoubleBillingSuspected")
	if len(got) != 1 || got[0]["tenant"] != "acme" || got[0]["kind"] != "llm_call" || got[0]["provider"] != "openai" ||
		got[0]["severity"] != "page" {
		t.Fatalf("LLMDoubleBillingSuspected firing for %v, want the page for acme only", got)
	}
}

// A double generation an LLM lookup or usage report records as a double-charge exception
// is a double charge of kind llm_call: DoubleChargeDetected fires for it, /metrics counts
// it, and the reconciliation table loses its cost in USD. A refund's double charge is still
// counted once, from its charges, though its exception exists too.
func TestLLMDoubleGenerationExceptionFeedsDoubleChargeDetected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	from := f.Clock.Now()
	op := f.llmCall(t, f.Tenant, "double-1", true, 12345)
	if _, created, err := reconstore.New(f.DB).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "openai", Ref: op.ID,
		TenantID: f.Tenant, OperationID: op.ID, ChargeRefs: []string{"chatcmpl-a", "chatcmpl-b"},
		Summary: "Two generations billed for one call.", Actor: "reconciler:openai", At: f.Clock.Now()}); err != nil || !created {
		t.Fatalf("record finding: %v %v", created, err)
	}
	// An LLM call whose two generations reconciliation recorded as provider charges (of 7
	// cents each), with their exception: counted once, from its charges.
	op2 := f.llmCall(t, f.Tenant, "double-2", true, 1000)
	for _, ref := range []string{"chatcmpl-double-2", "chatcmpl-extra"} {
		if err := f.DB.RecordCharge(ctx, ops.ProviderRecord{Provider: "openai", Ref: ref, OperationID: op2.ID,
			AmountCents: 7, Currency: "usd", Status: "succeeded"}, f.Tenant, f.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := reconstore.New(f.DB).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "openai", Ref: op2.ID,
		TenantID: f.Tenant, OperationID: op2.ID, ChargeRefs: []string{"chatcmpl-double-2", "chatcmpl-extra"},
		Summary: "Generated twice.", Actor: "reconciler:openai", At: f.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// A refund charged twice, with its exception.
	o, err := f.Seed().Open(ctx, f.Refund("r-1", 3800), "req-r", "w1")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"re_1", "re_2"} {
		if err := f.DB.RecordCharge(ctx, ops.ProviderRecord{Provider: "stripe", Ref: ref, OperationID: o.Op.ID, AmountCents: 3800,
			Currency: "usd", Status: "succeeded"}, f.Tenant, f.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := reconstore.New(f.DB).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Ref: o.Op.ID,
		TenantID: f.Tenant, OperationID: o.Op.ID, ChargeRefs: []string{"re_1", "re_2"}, Summary: "Refunded twice.",
		Actor: "reconciler:stripe", At: f.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	to := f.Clock.Now()

	rows, err := f.alerts.Counters(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	doubles := map[string]float64{}
	for _, r := range rows {
		doubles[r.Kind] += r.Values[alerts.DoubleCharges]
	}
	if doubles["llm_call"] != 2 || doubles["refund"] != 1 {
		t.Fatalf("double charges by kind %v, want two llm_call and one refund", doubles)
	}
	tallies, err := f.alerts.Tally(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	metric := map[string]float64{}
	for _, tl := range tallies {
		if tl.Metric == alerts.MetricProviderCharges && tl.Labels["double"] == "true" {
			metric[tl.Labels["kind"]] += tl.N
		}
	}
	if metric["llm_call"] != 2 || metric["refund"] != 1 {
		t.Fatalf("double charges on /metrics %v, want two llm_call and one refund", metric)
	}
	table, err := rollupstore.New(f.DB).ReconMetrics(ctx, recon.MetricsFilter{Window: recon.Window{From: from.Truncate(time.Hour), To: to.Truncate(time.Hour).Add(time.Hour)},
		Bucket: time.Hour, Kind: ops.KindLLMCall})
	if err != nil || len(table) != 1 {
		t.Fatalf("table %+v %v", table, err)
	}
	if r := table[0]; r.DoubleCharges != 2 || r.Charges != 4 || r.Lost["usd"] != 82345 {
		t.Fatalf("llm_call rows: %d double charges, %d charges, lost %v; want 2, 4 and 82345 micro-dollars", r.DoubleCharges, r.Charges, r.Lost)
	}

	rig := newAlertRig(t, f, string(alerts.DefaultRulesYAML()), nil)
	rig.evaluate(t)
	got := firing(t, f, "DoubleChargeDetected")
	kinds := map[string]bool{}
	for _, l := range got {
		kinds[l["kind"]] = true
	}
	if len(got) != 2 || !kinds["llm_call"] || !kinds["refund"] {
		t.Fatalf("DoubleChargeDetected firing for %v, want llm_call and refund", got)
	}
}

// A double generation found after its minute was rolled up is counted there all the same:
// the rollup job recomputes the minute of the operation whose exception was recorded.
func TestLateDoubleGenerationReachesTheRollups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.llmCall(t, f.Tenant, "late-1", true, 5000)
	f.Clock.Advance(10 * time.Minute) // past the rollup's overlap
	job := &recon.Rollups{Store: rollupstore.New(f.DB), Clock: f.Clock}
	if _, err := job.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Hour)
	if _, _, err := reconstore.New(f.DB).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "openai", Ref: op.ID,
		TenantID: f.Tenant, OperationID: op.ID, ChargeRefs: []string{"chatcmpl-a", "chatcmpl-b"}, Summary: "Generated twice.",
		Actor: "reconciler:openai", At: f.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := job.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := rollupstore.New(f.DB).RollupMetrics(ctx, recon.MetricsFilter{Window: recon.Window{From: t0.Truncate(time.Hour), To: t0.Truncate(time.Hour).Add(2 * time.Hour)},
		Bucket: time.Hour, Kind: ops.KindLLMCall})
	if err != nil || len(rows) != 1 {
		t.Fatalf("rollups %+v %v", rows, err)
	}
	if r := rows[0]; r.DoubleCharges != 1 || r.Lost["usd"] != 5000 {
		t.Fatalf("rolled-up llm_call row: %d double charges, lost %v; want 1 and 5000 micro-dollars", r.DoubleCharges, r.Lost)
	}
}
