package alertstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
)

// attemptsOnMetrics is settle_attempts_total by outcome, as a scrape of reg sees it.
func attemptsOnMetrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return counterBy(t, reg, alerts.MetricAttempts, "outcome")
}

// counterBy sums the counter named metric by the values of its label, as a scrape of reg
// sees them.
func counterBy(t *testing.T, reg *prometheus.Registry, metric, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestMetricsCountATimeoutThatOutlastsTheLag: ops rule 8 wants timeout rates to be counted
// facts, on /metrics too, where the exported TimeoutRateHigh rule reads them. An attempt
// that is still running when the collector counts its minute (an LLM stream that stalls
// waits 60 s for its next event; an attempt may run 10 minutes) must still be counted as a
// timeout when it ends as one.
func TestMetricsCountATimeoutThatOutlastsTheLag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := alerts.NewCollector(f.alerts, f.Clock, nil)
	c.MinRefresh = 0
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	o, err := f.Seed().Open(ctx, f.Refund("late-1", 100), "req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(2 * time.Minute)
	attemptsOnMetrics(t, reg)
	if _, err := f.Seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(2 * time.Minute)
	got := attemptsOnMetrics(t, reg)
	if got["timeout"] != 1 {
		t.Fatalf("settle_attempts_total by outcome %v, want the timeout counted once it ended", got)
	}
	// A quick attempt, started and finished within one read, counts once too, and nothing
	// counts twice on later reads.
	q, err := f.Seed().Open(ctx, f.Refund("quick-1", 100), "req-2", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed().Finish(ctx, q.Op, q.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.Clock.Advance(2 * time.Minute)
		attemptsOnMetrics(t, reg)
	}
	if got := attemptsOnMetrics(t, reg); got["timeout"] != 1 || got["server_error"] != 1 || len(got) != 2 {
		t.Fatalf("settle_attempts_total by outcome %v, want one timeout and one server_error", got)
	}
}

// answersOnMetrics is settle_client_requests_total by answer, as a scrape of reg sees it.
func answersOnMetrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return counterBy(t, reg, alerts.MetricClientRequests, "answer")
}

// TestMetricsCountARequestByItsFinalAnswer: ops rule 8 wants duplicate and replay rates to be
// counted facts, on /metrics too. A repeat that waits for the first request's send (Prefer:
// wait, a long LLM call) is answered minutes after it arrived: it is counted once, with the
// answer it got, never as unanswered first; one that is never answered is counted as
// unanswered once, an hour after it arrived (alerts.AnswerReach), and the counter never goes
// down meanwhile.
func TestMetricsCountARequestByItsFinalAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := alerts.NewCollector(f.alerts, f.Clock, nil)
	c.MinRefresh = 0
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	first, err := f.Seed().Open(ctx, f.Refund("wait-1", 100), "req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	// Two repeats of the open intent, recorded as the ledger records a request it holds.
	waited, err := f.DB.Open(ctx, ops.OpenParams{Op: first.Op, RequestRef: "req-2", Now: f.Clock.Now()})
	if err != nil || waited.Created {
		t.Fatalf("a repeat opened %+v (%v), want the first request's operation", waited, err)
	}
	if _, err := f.DB.Open(ctx, ops.OpenParams{Op: first.Op, RequestRef: "req-3", Now: f.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	total := func(m map[string]float64) (n float64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	var last float64
	scrape := func(advance time.Duration) map[string]float64 {
		t.Helper()
		f.Clock.Advance(advance)
		got := answersOnMetrics(t, reg)
		if total(got) < last {
			t.Fatalf("settle_client_requests_total went down, from %v to %v", last, got)
		}
		last = total(got)
		return got
	}
	scrape(90 * time.Second)
	f.Clock.Advance(30 * time.Second)
	if err := f.DB.AnswerClientRequest(ctx, waited.ClientRequestID, ops.AnswerReplayed, f.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	got := scrape(2 * time.Minute)
	if got["new"] != 1 || got["replayed"] != 1 || got["unanswered"] != 0 {
		t.Fatalf("settle_client_requests_total by answer %v, want the request answered two minutes late counted as replayed", got)
	}
	for range 4 {
		got = scrape(20 * time.Minute)
	}
	if got["new"] != 1 || got["replayed"] != 1 || got["unanswered"] != 1 || len(got) != 3 {
		t.Fatalf("settle_client_requests_total by answer %v, want one new, one replayed and the request never answered once", got)
	}
}
