package llm

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// slowSpends is a spend store whose every read takes took on the manual clock, as the read
// of a busy tenant's day does late in the day, and counts the reads.
type slowSpends struct {
	clock *ops.ManualClock
	took  time.Duration
	reads int
}

func (s *slowSpends) LLMSpend(context.Context, int64, time.Time, string) (int64, int64, error) {
	s.reads++
	s.clock.Advance(s.took)
	return 1_000_000, 10, nil
}

// TestASlowSpendReadIsTrustedLonger: the budget's read sums the tenant's calls of the day,
// so it slows as a busy tenant's day fills; re-read every 5 s it would keep a replica's
// connection busy with one tenant. A read that took 1 s is trusted for 50 s (budgetReadShare),
// a quick one for the refresh, so the reads' cost stays a small share of the time whatever
// the tenant's volume. The check stays the one of ops rule 8's recorded refusals; this
// bounds what it costs.
func TestASlowSpendReadIsTrustedLonger(t *testing.T) {
	t.Parallel()
	clock := ops.NewManualClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	store := &slowSpends{clock: clock, took: time.Second}
	b := NewBudgets(store, nil, clock, 5*time.Second)
	ctx := context.Background()
	check := func() {
		t.Helper()
		if err := b.Check(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	check()
	clock.Advance(30 * time.Second)
	check()
	if store.reads != 1 {
		t.Fatalf("a read of 1 s was read again after 30 s: %d reads", store.reads)
	}
	clock.Advance(25 * time.Second)
	check()
	if store.reads != 2 {
		t.Fatalf("after 56 s: %d reads, want 2", store.reads)
	}
	store.took = 0
	clock.Advance(time.Minute)
	check()
	clock.Advance(6 * time.Second)
	check()
	if store.reads != 4 {
		t.Fatalf("quick reads are trusted for the refresh only: %d reads, want 4", store.reads)
	}
}
