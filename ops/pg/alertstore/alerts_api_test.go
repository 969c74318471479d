package alertstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
)

// llmCallOn is llmCall of a gateway route, always resent: its request stores the route as
// the gateway does.
func (f *fixture) llmCallOn(t *testing.T, route, key string) {
	t.Helper()
	f.llmCallOf(t, route, key, true)
}

// llmCallOf is an llm_call of route that succeeds at once, or, with resend, after a timeout
// and a resend flagged as a possible duplicate.
func (f *fixture) llmCallOf(t *testing.T, route, key string, resend bool) {
	t.Helper()
	ctx := context.Background()
	o, err := f.Seed().Open(ctx, ops.Intent{TenantID: f.Tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key,
		Fingerprint: "fp-" + key, Request: []byte(`{"route":"` + route + `","body":{"model":"m"}}`)}, "req-"+key, "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, a := o.Op, o.Attempt
	if resend {
		if op, err = f.Seed().Finish(ctx, op, a, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout}); err != nil {
			t.Fatal(err)
		}
		if op, a, err = f.Seed().BeginAttempt(ctx, op, "w1"); err != nil {
			t.Fatal(err)
		}
	}
	cost := int64(1000)
	if _, err = f.Seed().Finish(ctx, op, a, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK, PossibleDuplicate: resend,
		CostMicros: &cost, Result: &ops.Result{ProviderRef: "resp-" + key, Body: []byte(`{}`), CostMicros: cost}}); err != nil {
		t.Fatal(err)
	}
}

// The counters on /metrics carry the API each LLM operation called (api="chat_completions",
// "responses"), so that a resend storm on one API shows as that API's: possible duplicates
// and the attempts they are a share of are split alike, and so are the client requests and
// the operations created and closed. A refund's counters carry api="".
func TestLLMMetricsCarryTheirAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	from := f.Clock.Now()
	for i := range 3 {
		f.llmCallOn(t, "/v1/responses", fmt.Sprintf("resp-%d", i))
	}
	f.llmCallOn(t, "/v1/chat/completions", "chat-1")
	r, err := f.Seed().Open(ctx, f.Refund("r-api", 500), "req-r-api", "w1")
	if err != nil {
		t.Fatal(err)
	}
	// An attempt is counted when it finishes.
	if _, err := f.Seed().Finish(ctx, r.Op, r.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	tallies, err := f.alerts.Tally(ctx, from, f.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, tl := range tallies {
		switch tl.Metric {
		case alerts.MetricPossibleDuplicates, alerts.MetricAttempts, alerts.MetricOperationsCreated, alerts.MetricOperationsClosed,
			alerts.MetricClientRequests:
			api, ok := tl.Labels["api"]
			if !ok {
				t.Fatalf("%s without an api label: %v", tl.Metric, tl.Labels)
			}
			got[tl.Metric+" "+tl.Labels["kind"]+" "+api] += tl.N
		}
	}
	want := map[string]float64{
		alerts.MetricPossibleDuplicates + " llm_call responses":        3,
		alerts.MetricPossibleDuplicates + " llm_call chat_completions": 1,
		alerts.MetricAttempts + " llm_call responses":                  6,
		alerts.MetricAttempts + " llm_call chat_completions":           2,
		alerts.MetricAttempts + " refund ":                             1,
		alerts.MetricOperationsCreated + " llm_call responses":         3,
		alerts.MetricOperationsClosed + " llm_call responses":          3,
		alerts.MetricClientRequests + " llm_call responses":            3,
		alerts.MetricOperationsCreated + " refund ":                    1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], n, got)
		}
	}
}

// LLMDoubleBillingSuspected pages per API: a tenant whose Responses calls are resent half of
// the time pages for api="responses", though its many chat completions, sent once each,
// would dilute the resends below the burn rate were the APIs counted together; its chat
// completions page nobody.
func TestDoubleBillingRuleFiresPerAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 12 {
		f.llmCallOf(t, "/v1/responses", fmt.Sprintf("resp-%d", i), true)
	}
	for i := range 70 {
		f.llmCallOf(t, "/v1/chat/completions", fmt.Sprintf("chat-%d", i), false)
	}
	f.Clock.Advance(time.Second)
	rig := newAlertRig(t, f, string(alerts.DefaultRulesYAML()), nil)
	rig.evaluate(t)
	f.Clock.Advance(3 * time.Minute) // past the rule's for: 2m
	rig.evaluate(t)
	got := firing(t, f, "LLMDoubleBillingSuspected")
	if len(got) != 1 || got[0]["api"] != "responses" || got[0]["tenant"] != "acme" || got[0]["kind"] != "llm_call" ||
		got[0]["severity"] != "page" {
		t.Fatalf("LLMDoubleBillingSuspected firing for %v, want the page for acme's responses only", got)
	}
}
