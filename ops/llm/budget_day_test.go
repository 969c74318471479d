package llm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestAWholeDaysFitAgreesWithTheBudgetsCheck: FitADay, which a job's submission asks, says a
// call is over the whole budget exactly when CheckCall refuses it with ErrOverWholeBudget
// whatever was spent (so a job refused at submission is one the worker would fail, and one
// accepted is one it would send or hold), and the largest cap and input it names are the
// largest whose worst case fits the budget, with a token more over it.
// ops rule 12
func TestAWholeDaysFitAgreesWithTheBudgetsCheck(t *testing.T) {
	t.Parallel()
	prices, clock := DefaultPrices(), ops.NewManualClock(time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC))
	const budget = 90_000
	for _, s := range []CallSize{
		{Model: "gpt-4o", InputTokens: 300, OutputCap: 10_000},
		{Model: "gpt-4o", InputTokens: 300, OutputCap: 8_000},
		{Model: "gpt-4o", InputTokens: 40_000, OutputCap: 1_000},
		{Model: "gpt-4o", InputTokens: 1_000, OutputCap: 9_000},
		{Model: "claude-opus-4-1", InputTokens: 3_000, OutputCap: 32},
	} {
		fit := prices.FitADay(s, budget)
		for _, spent := range []int64{0, budget / 2, budget - 1} {
			h, err := NewBudgets(fixedSpends{budget: budget, spent: spent}, prices, clock, 0).CheckCall(context.Background(), 1, s, "max_tokens")
			h.Unsent()
			if over := errors.Is(err, ErrOverWholeBudget); over != fit.Over {
				t.Errorf("%+v with %d spent: FitADay says over %v, CheckCall %v", s, spent, fit.Over, err)
			}
		}
		if !fit.Over {
			continue
		}
		if worst, _ := prices.WorstCaseMicros(s); worst != fit.Worst {
			t.Errorf("%+v: worst case %d, want %d", s, fit.Worst, worst)
		}
		if c := fit.LargestCap; c >= 0 {
			// A cap of 0 is none (the model's largest answer): its input alone is counted then.
			at, _ := prices.WorstCaseMicros(CallSize{Model: s.Model, InputTokens: s.InputTokens, OutputCap: max(c, 1)})
			if c == 0 {
				at, _ = prices.WorstCaseMicros(CallSize{Model: s.Model, InputTokens: s.InputTokens, NoOutput: true})
			}
			past, _ := prices.WorstCaseMicros(CallSize{Model: s.Model, InputTokens: s.InputTokens, OutputCap: c + 1})
			if at > budget || past <= budget {
				t.Errorf("%+v: largest cap %d costs %d and one more %d, want the last within %d", s, c, at, past, budget)
			}
		}
		if n := fit.LargestInput; n >= 0 {
			at, _ := prices.WorstCaseMicros(CallSize{Model: s.Model, InputTokens: n, OutputCap: s.OutputCap})
			past, _ := prices.WorstCaseMicros(CallSize{Model: s.Model, InputTokens: n + 1, OutputCap: s.OutputCap})
			if at > budget || past <= budget {
				t.Errorf("%+v: largest input %d costs %d and one more %d, want the last within %d", s, n, at, past, budget)
			}
		}
	}
}
