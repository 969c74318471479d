package llm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestABudgetRefusalsFiguresShowWhyItDoesNotFit is the attack of a refusal whose figures,
// rounded to the currency's minor unit, read as if nothing were wrong: 0.0869 USD left of
// 0.09 and a worst case of 0.0871 both printed "0.09 USD", or 12.4 yen left and a worst case
// of 12.45 both "12 JPY". Every budget refusal writes an amount the minor unit does not
// hold exactly with its six decimals, so the client reads why the call does not fit.
// ops rule 12
func TestABudgetRefusalsFiguresShowWhyItDoesNotFit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := ops.NewManualClock(time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC))
	says := func(what string, err error, wants ...string) {
		t.Helper()
		msg := ops.ErrorMessage(err)
		for _, want := range wants {
			if !strings.Contains(msg, want) {
				t.Errorf("%s does not say %q: %s", what, want, msg)
			}
		}
	}
	usd := NewBudgets(fixedSpends{budget: 90_000, spent: 3_100}, DefaultPrices(), clock, 0)
	// 27,166 bytes at 2 and 4096 tokens at 8: 87,100 micro-dollars, 200 more than is left.
	_, err := usd.CheckCall(ctx, 1, CallSize{Model: "fake-large", InputTokens: 27_166, OutputCap: 4096}, "max_tokens")
	says("the refusal of 0.0871 USD with 0.0869 USD left", err, "may cost up to 0.087100 USD",
		"more than the 0.086900 USD left of your tenant's LLM budget of 0.09 USD a day", "(0.003100 USD spent so far today")

	yen, perr := ParsePrices([]byte(`{"currency": "jpy", "models": {"fake-yen": {"input": 1000, "output": 1000, "max_output_tokens": 4096}}}`))
	if perr != nil {
		t.Fatal(perr)
	}
	jpy := NewBudgets(fixedSpends{budget: 100_000_000, spent: 87_600_000}, yen, clock, 0)
	_, err = jpy.CheckCall(ctx, 1, CallSize{Model: "fake-yen", InputTokens: 12_000, OutputCap: 450}, "max_tokens")
	says("the refusal of 12.45 JPY with 12.4 JPY left", err, "may cost up to 12.450000 JPY",
		"more than the 12.400000 JPY left of your tenant's LLM budget of 100 JPY a day", "(87.600000 JPY spent so far today")

	// Two calls of 0.032968 in flight hold 0.065936 of the 0.0869 left: the third fits what
	// is left, not beside them.
	call := CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 4096}
	for range 2 {
		if _, err := usd.CheckCall(ctx, 2, call, "max_tokens"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = usd.CheckCall(ctx, 2, call, "max_tokens")
	says("the refusal held by calls in flight", err, "may cost up to 0.032968 USD", "of the 0.086900 USD left", "0.065936 USD is held")

	spent := NewBudgets(fixedSpends{budget: 90_000, spent: 90_100}, DefaultPrices(), clock, 0)
	_, err = spent.CheckCall(ctx, 1, call, "max_tokens")
	says("the refusal of a spent budget", err, "budget of 0.09 USD a day is spent (0.090100 USD so far today")
}
