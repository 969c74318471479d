package llm

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// ledgerSpends is a spend store whose spend is what the test wrote as the calls' costs, as
// the database sums the costs their closes wrote.
type ledgerSpends struct {
	mu            sync.Mutex
	budget, spent int64
	reads         int
}

func (l *ledgerSpends) LLMSpend(context.Context, int64, time.Time, string) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return l.budget, l.spent, nil
}

// write records a call's cost, as its close does before its run ends.
func (l *ledgerSpends) write(micros int64) {
	l.mu.Lock()
	l.spent += micros
	l.mu.Unlock()
}

// holdWorld is a tenant with a dollar a day on a manual clock, its calls of fake-large at 2
// micro-dollars an input token and 8 an output token, with no largest answer.
type holdWorld struct {
	store *ledgerSpends
	clock *ops.ManualClock
	b     *Budgets
}

func newHoldWorld(t *testing.T) *holdWorld {
	t.Helper()
	prices, err := ParsePrices([]byte(`{"models": {"fake-large": {"input": 2, "output": 8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w := &holdWorld{store: &ledgerSpends{budget: 1_000_000}, clock: ops.NewManualClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))}
	w.b = NewBudgets(w.store, prices, w.clock, 5*time.Second)
	return w
}

// costing is a call whose worst case is micros (a multiple of 8, over 800): 100 input tokens
// and the output cap that makes up the rest.
func costing(micros int64) CallSize {
	return CallSize{Model: "fake-large", InputTokens: 100, OutputCap: (micros - 200) / 8}
}

// call asks the budget to admit a new call whose worst case is micros.
func (w *holdWorld) call(micros int64) (*Hold, error) {
	return w.b.CheckCall(context.Background(), 1, costing(micros), "max_tokens")
}

// TestCallsInFlightHoldTheLeftover is the attack of a tenant with a dollar left that sends
// fifty calls at once whose worst case is 30 cents each: admitted against the same spend,
// every one would be sent. Three are admitted, whose worst cases the dollar pays together;
// the others are refused with llm_budget_held, saying the leftover is held by calls in
// flight and that nothing was sent, with the refresh as Retry-After rather than midnight.
// One read of the spend serves them all.
// ops rule 8
// ops rule 12
func TestCallsInFlightHoldTheLeftover(t *testing.T) {
	t.Parallel()
	w := newHoldWorld(t)
	const n = 50
	var wg sync.WaitGroup
	holds, errs := make([]*Hold, n), make([]error, n)
	for i := range n {
		wg.Go(func() { holds[i], errs[i] = w.call(300_000) })
	}
	wg.Wait()
	admitted := 0
	for i, err := range errs {
		if err == nil {
			admitted++
			if holds[i] == nil {
				t.Errorf("an admitted call holds nothing")
			}
			continue
		}
		msg := ops.ErrorMessage(err)
		if p, _ := ProblemOf(err); ops.ErrorReason(err) != ReasonBudgetHeld || p.RetryAfter != 5*time.Second {
			t.Errorf("%s, Retry-After %s: %s; want %s in 5 s", ops.ErrorReason(err), p.RetryAfter, msg, ReasonBudgetHeld)
		}
		for _, want := range []string{"may cost up to 0.30 USD", "0.90 USD is held by your tenant's calls in flight", "nothing of it was sent", "Retry in a few seconds"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal does not say %q: %s", want, msg)
				break
			}
		}
	}
	if admitted != 3 {
		t.Errorf("%d of %d calls of 0.30 admitted against a dollar left, want 3", admitted, n)
	}
	if w.store.reads != 1 {
		t.Errorf("%d reads of the spend, want 1", w.store.reads)
	}
}

// TestAHoldEndsOnEveryPathAndCountsTheCallOnce: a call that sent nothing gives its hold back
// at once; one answered holds what its answer cost instead of its worst case; one that ended counts what its close wrote until the next read of the spend,
// which includes it, so it is counted neither twice nor not at all; one whose outcome is
// unknown keeps its worst case counted until that read, as the provider may bill it yet; an
// end told twice gives back nothing more; a call of yesterday counts in yesterday's spend.
// ops rule 8
func TestAHoldEndsOnEveryPathAndCountsTheCallOnce(t *testing.T) {
	t.Parallel()
	w := newHoldWorld(t)
	fits := func(micros int64, want bool, why string) {
		t.Helper()
		h, err := w.call(micros)
		if (err == nil) != want {
			t.Fatalf("%s: a call of %d micro-dollars: %v, want admitted %v", why, micros, err, want)
		}
		h.Unsent()
	}
	h, err := w.call(600_000)
	if err != nil {
		t.Fatal(err)
	}
	fits(400_800, false, "beside a call of 0.60 in flight")
	h.Unsent()
	h.Unsent()
	fits(1_000_000, true, "once the call sent nothing")
	fits(1_000_008, false, "an end told twice")

	h, _ = w.call(600_000)
	h.Spent(100_000) // its answer, before its close
	fits(900_000, true, "beside a call answered for 0.10")
	fits(900_008, false, "beside a call answered for 0.10")
	w.store.write(100_000) // its close
	h.Ended(&ops.Operation{Status: ops.StatusSucceeded, CostMicros: 100_000})
	fits(900_000, true, "after a call that cost 0.10, before the next read")
	fits(900_008, false, "after a call that cost 0.10, before the next read")
	w.clock.Advance(5 * time.Second)
	fits(900_000, true, "after the read that includes it")
	fits(900_008, false, "after the read that includes it")

	for _, op := range []*ops.Operation{{Status: ops.StatusUnknown}, nil} {
		h, _ = w.call(600_000)
		h.Ended(op)
		fits(300_008, false, "an unknown outcome before the next read")
		w.clock.Advance(5 * time.Second)
		fits(900_000, true, "an unknown outcome after the next read")
	}

	h, _ = w.call(600_000)
	w.clock.Set(time.Date(2026, 12, 8, 0, 0, 1, 0, time.UTC))
	w.store.write(-100_000) // the new day's spend starts from nothing
	fits(400_000, true, "a new day, yesterday's call in flight")
	h.Ended(&ops.Operation{Status: ops.StatusSucceeded, CostMicros: 600_000})
	fits(1_000_000, true, "a new day, once yesterday's call ended")
}
