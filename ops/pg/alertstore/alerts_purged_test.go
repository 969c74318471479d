package alertstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// The purge deletes an LLM call's request a week or so after its key's TTL, and /metrics and
// the alerts still count its events under the API it called: a recount of the hours around it
// (or a late close) splits them as they were split before, and no event of a purged call
// lands under an empty api label.
func TestPurgedCallsKeepTheirAPIOnMetricsAndAlerts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	from := f.Clock.Now()
	for i := range 3 {
		f.llmCallOn(t, "/v1/responses", fmt.Sprintf("resp-%d", i))
	}
	f.llmCallOn(t, "/v1/embeddings", "emb-1")
	to := f.Clock.Now().Add(time.Second)
	rep, err := (&llm.Purger{Store: purgestore.New(f.DB), Clock: ops.NewManualClock(t0.Add(30 * 24 * time.Hour)), Keep: llm.DefaultBodyKeep,
		JobTTL: 24 * time.Hour, Batch: 10}).RunOnce(ctx)
	if err != nil || rep.Operations != 4 {
		t.Fatalf("purge: %+v %v, want the 4 calls purged", rep, err)
	}

	tallies, err := f.alerts.Tally(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, tl := range tallies {
		switch tl.Metric {
		case alerts.MetricPossibleDuplicates, alerts.MetricAttempts, alerts.MetricOperationsCreated, alerts.MetricOperationsClosed,
			alerts.MetricClientRequests:
			got[tl.Metric+" "+tl.Labels["api"]] += tl.N
		}
	}
	want := map[string]float64{
		alerts.MetricPossibleDuplicates + " responses":  3,
		alerts.MetricPossibleDuplicates + " embeddings": 1,
		alerts.MetricAttempts + " responses":            6,
		alerts.MetricAttempts + " embeddings":           2,
		alerts.MetricOperationsCreated + " responses":   3,
		alerts.MetricOperationsClosed + " embeddings":   1,
		alerts.MetricClientRequests + " responses":      3,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("/metrics: %s = %v, want %v (all: %v)", k, got[k], n, got)
		}
	}
	for k, n := range got {
		if k[len(k)-1] == ' ' {
			t.Errorf("/metrics: %v events of purged calls under an empty api label: %s", n, k)
		}
	}

	rows, err := f.alerts.Counters(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	split := map[string][2]float64{}
	for _, r := range rows {
		if r.API != "" {
			split[r.API] = [2]float64{r.Values[alerts.PossibleDuplicates], r.Values[alerts.Attempts]}
		} else if r.Values[alerts.PossibleDuplicates] != 0 {
			t.Errorf("the alerts count %v possible duplicates of no API", r.Values[alerts.PossibleDuplicates])
		}
	}
	if split["responses"] != [2]float64{3, 6} || split["embeddings"] != [2]float64{1, 2} {
		t.Fatalf("the alerts' rows by API (possible duplicates, attempts): %v, want responses 3 of 6 and embeddings 1 of 2", split)
	}
}
