package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/jobs"
)

// TestAWorkersRunsAreCountedByOutcome holds what the processes' metrics count of their job
// workers (settle_jobs_run_total): each run once, by the outcome it left its job in, a
// published job as published and a job its tenant's spent budget held back as queued; the
// polls of the workers while it waits count nothing more.
// ops rule 8
func TestAWorkersRunsAreCountedByOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, clock := budgetedWorker(t, e)
	w.Runs = &jobs.Runs{}
	e.submit(t, e.tenant, "counted-within", docA, "v1")
	e.drain(t, w)
	spendAll(t, e)
	clock.Advance(2 * time.Second)
	e.submit(t, e.tenant, "counted-past", docB, "v1")
	for range 3 {
		if _, err := w.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	want := []jobs.RunCount{{Outcome: "published", N: 1}, {Outcome: "queued", N: 1}}
	if got := w.Runs.Counts(); !slices.Equal(got, want) {
		t.Errorf("runs %+v, want %+v", got, want)
	}
	if (*jobs.Runs)(nil).Counts() != nil {
		t.Error("a nil Runs counts something")
	}
}
