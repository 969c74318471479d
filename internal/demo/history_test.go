package demo

import (
	"context"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// writeTestHistory writes a history of plan into a fresh database through writeHistory, as
// the demo does, against fakes on the demo's switching clock.
func writeTestHistory(t testing.TB, plan historyPlan) (*pg.DB, *ops.Tenant) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	clock := &fakeClock{}
	st := fake.NewStripe(fake.StripeOptions{Clock: clock.Now, Seed: 1})
	stripeBase, err := st.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fl := fake.NewLLM(fake.LLMOptions{Clock: clock.Now, Seed: 1})
	llmBase, err := fl.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	tenant, err := db.EnsureTenant(ctx, tenantName)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	started := time.Now()
	if err := writeHistory(ctx, db, tenant, &Fakes{clock: clock, Stripe: st, StripeBase: stripeBase, LLM: fl, LLMBase: llmBase},
		plan, nil, logger); err != nil {
		t.Fatalf("write the history: %v", err)
	}
	t.Logf("%d days at %d refunds per busy hour written in %s", plan.Days, plan.PerHour, time.Since(started).Round(time.Millisecond))
	return db, tenant
}

// TestDemoHistoryTellsTheStory writes the demo's month, smaller than the demo's, through
// the same code, and reads the story back from the product's own figures: the rollups,
// the alert history and the exception queue.
func TestDemoHistoryTellsTheStory(t *testing.T) {
	t.Parallel()
	// Writing a month through the product's own code takes seconds.
	testtool.Heavy(t, "a month of demo history")
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	plan := historyPlan{Days: 30, PerHour: 3, End: end, Seed: 7}
	db, _ := writeTestHistory(t, plan)
	story := newStoryline(plan)

	// The month's LLM traffic went to every API the gateway serves from OpenAI.
	for _, route := range []string{"/v1/chat/completions", "/v1/responses", "/v1/embeddings"} {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE kind = 'llm_call' AND request->>'route' = $1`,
			route).Scan(&n); err != nil || n == 0 {
			t.Errorf("the history holds %d calls of %s (%v)", n, route, err)
		}
	}

	// 30 days of rollups, weekdays busier than weekends.
	to := end.Truncate(24 * time.Hour).Add(24 * time.Hour)
	rows, err := rollupstore.New(db).RollupMetrics(ctx, recon.MetricsFilter{Window: recon.Window{From: to.Add(-31 * 24 * time.Hour), To: to}, Bucket: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	days := map[time.Time]*recon.MetricsRow{}
	for _, r := range rows {
		d := days[r.Bucket]
		if d == nil {
			d = &recon.MetricsRow{}
			days[r.Bucket] = d
		}
		d.ClientRequests += r.ClientRequests
		d.Duplicates += r.Duplicates
	}
	var weekday, weekend []float64
	var rates []float64
	for b, d := range days {
		if d.ClientRequests == 0 {
			continue
		}
		if wd := b.Weekday(); wd == time.Saturday || wd == time.Sunday {
			weekend = append(weekend, float64(d.ClientRequests))
		} else {
			weekday = append(weekday, float64(d.ClientRequests))
		}
		// Whole days only: the first and the last are cut by the history's ends.
		whole := b.After(end.Add(-30*24*time.Hour)) && b.Add(24*time.Hour).Before(end)
		if !b.Equal(story.release) && whole {
			rates = append(rates, float64(d.Duplicates)/float64(d.ClientRequests))
		}
	}
	if n := len(weekday) + len(weekend); n < 30 {
		t.Errorf("rollups hold client requests on %d days, want 30 or more", n)
	}
	if mean(weekday) <= mean(weekend)*1.5 {
		t.Errorf("weekdays average %.1f client requests, weekends %.1f: weekdays should be clearly busier", mean(weekday), mean(weekend))
	}

	// The release day's duplicate rate stands out.
	rel := days[story.release]
	if rel == nil || rel.ClientRequests == 0 {
		t.Fatalf("no rollups on the release day %s", story.release)
	}
	slices.Sort(rates)
	median := rates[len(rates)/2]
	if got := float64(rel.Duplicates) / float64(rel.ClientRequests); got < 1.5*median || got < rates[len(rates)-1] {
		t.Errorf("release day duplicate rate %.3f, median of other days %.3f, highest %.3f: it should stand out", got, median, rates[len(rates)-1])
	}

	checkStormAlert(t, db, story)
	checkExceptions(t, db)
}

// checkStormAlert finds TimeoutRateHigh firing during the storm and resolving after it in
// the alert history.
func checkStormAlert(t *testing.T, db *pg.DB, story storyline) {
	t.Helper()
	hist, err := alertstore.New(db).AlertHistory(context.Background(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	var fired, resolved time.Time
	for _, tr := range slices.Backward(hist) {
		if tr.Alert != "TimeoutRateHigh" {
			continue
		}
		if tr.To == "firing" && fired.IsZero() && !tr.At.Before(story.stormFrom) {
			fired = tr.At
		}
		if !fired.IsZero() && resolved.IsZero() && tr.To == "inactive" && tr.At.After(fired) {
			resolved = tr.At
		}
	}
	switch {
	case fired.IsZero() || fired.After(story.stormTo):
		t.Errorf("TimeoutRateHigh did not fire during the storm %s..%s (fired %s)", story.stormFrom, story.stormTo, fired)
	case resolved.IsZero() || resolved.Before(story.stormTo) || resolved.After(story.stormTo.Add(2*time.Hour)):
		t.Errorf("TimeoutRateHigh fired at %s but did not resolve within 2 hours of the storm's end (%s)", fired, resolved)
	}
}

// checkExceptions finds exactly two double charges of refunds, one resolved and one
// acknowledged and assigned, and a double generation recorded.
func checkExceptions(t *testing.T, db *pg.DB) {
	t.Helper()
	ctx := context.Background()
	refunds, err := reconstore.New(db).ListExceptions(ctx, recon.ExceptionFilter{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var resolved, open int
	for _, ex := range refunds {
		if ex.Status == recon.ExceptionResolved {
			resolved++
		} else {
			open++
		}
	}
	if len(refunds) != 2 || resolved != 1 || open != 1 {
		t.Errorf("refund double charges: %d (%d resolved, %d not), want 2 (1 and 1)", len(refunds), resolved, open)
	}
	gens, err := reconstore.New(db).ListExceptions(ctx, recon.ExceptionFilter{Kind: recon.ExceptionDoubleCharge, Provider: "openai", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) == 0 {
		t.Errorf("no double generation recorded")
	}
	acked, err := reconstore.New(db).ListExceptions(ctx, recon.ExceptionFilter{Status: recon.ExceptionAcknowledged, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	assigned := 0
	for _, ex := range acked {
		if ex.Assignee != "" {
			assigned++
		}
	}
	if assigned < 2 {
		t.Errorf("%d acknowledged and assigned exceptions, want at least 2", assigned)
	}
}

func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// BenchmarkDemoHistory writes the demo's month at the demo's own scale and reports how
// long it took: the demo waits for it before it serves.
func BenchmarkDemoHistory(b *testing.B) {
	for range b.N {
		writeTestHistory(b, historyPlan{Days: 30, PerHour: demoHistoryPerHour, End: time.Now().UTC().Truncate(time.Minute), Seed: 7})
	}
}
