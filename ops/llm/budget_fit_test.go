package llm

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestAWorstCaseCountsEveryByteAsATokenAtTheDearestRates holds the bound a budget admits new
// calls by: the body's bytes as input tokens at the dearest rate the model bills a prompt
// token (a cache write's, for Anthropic's models), every output token the cap allows on
// every answer at the output price, the model's largest answer where it names none or a
// larger one, and no bound at all where neither is known.
func TestAWorstCaseCountsEveryByteAsATokenAtTheDearestRates(t *testing.T) {
	t.Parallel()
	prices := DefaultPrices()
	bare, err := ParsePrices([]byte(`{"models": {"fake-large": {"input": 2, "output": 8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		table  *PriceTable
		s      CallSize
		micros int64
		ok     bool
	}{
		{"a cap", prices, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 1000}, 100*2 + 1000*8, true},
		{"a cap on each of three answers", prices, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 1000, Choices: 3}, 100*2 + 3000*8, true},
		{"a dated snapshot", prices, CallSize{Model: "fake-large-2026-01-01", InputTokens: 100, OutputCap: 1000}, 100*2 + 1000*8, true},
		{"a cache write dearer than the input", prices, CallSize{Model: "claude-sonnet-4-5", InputTokens: 100, OutputCap: 10}, 100*6 + 10*15, true},
		{"no cap: the model's largest answer", prices, CallSize{Model: "fake-large", InputTokens: 100}, 100*2 + 4096*8, true},
		{"a cap over the model's largest answer", prices, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 100_000}, 100*2 + 4096*8, true},
		{"a cap the table bounds nowhere", bare, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: maxOutputCap}, 100*2 + maxOutputCap*8, true},
		{"no cap and no largest answer", bare, CallSize{Model: "fake-large", InputTokens: 100}, 0, false},
		{"embeddings: the input alone", prices, CallSize{Model: "text-embedding-3-large", InputTokens: 1_000_000, NoOutput: true}, 130_000, true},
		{"a model the table does not price", prices, CallSize{Model: "fake-unpriced", InputTokens: 100, OutputCap: 10}, 0, false},
	} {
		if got, ok := c.table.WorstCaseMicros(c.s); got != c.micros || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, got, ok, c.micros, c.ok)
		}
	}
}

// TestTheLargestOutputCapIsTheLargestThatFits: the cap a refusal offers, and the one Settle
// sets on a call that names none, keeps the call's worst case within what is left, and one
// token more would not; an input that alone does not fit has none; an output that costs
// nothing is bounded by the model alone.
func TestTheLargestOutputCapIsTheLargestThatFits(t *testing.T) {
	t.Parallel()
	prices := DefaultPrices()
	s := CallSize{Model: "fake-large", InputTokens: 100}
	if got := prices.LargestOutputCap(s, 10_000); got != 1225 {
		t.Errorf("the largest cap of 100 bytes on fake-large with 10,000 left: %d, want (10,000 - 200) / 8 = 1225", got)
	}
	s.Choices = 2
	if got := prices.LargestOutputCap(s, 10_000); got != 612 {
		t.Errorf("with two answers: %d, want 612", got)
	}
	if got := prices.LargestOutputCap(CallSize{Model: "fake-large", InputTokens: 5001}, 10_000); got != -1 {
		t.Errorf("an input that alone costs 10,002 of the 10,000 left: %d, want -1", got)
	}
	if got := prices.LargestOutputCap(CallSize{Model: "fake-large", InputTokens: 100}, 1_000_000_000); got != 4096 {
		t.Errorf("a budget far above the model's largest answer: %d, want 4096", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	models := []string{"fake-small", "gpt-4o", "claude-opus-4-1", "claude-haiku-4-5"}
	for range 2000 {
		s := CallSize{Model: models[r.IntN(len(models))], InputTokens: r.Int64N(50_000), Choices: 1 + r.Int64N(3)}
		left := r.Int64N(2_000_000)
		n := prices.LargestOutputCap(s, left)
		p, _ := prices.lookup(s.Model)
		switch {
		case n < 0:
			if p.worstMicros(s.InputTokens, 0) <= left {
				t.Fatalf("%+v with %d left: no cap, yet its input fits", s, left)
			}
		case p.worstMicros(s.InputTokens, n*s.Choices) > left:
			t.Fatalf("%+v with %d left: the cap %d does not fit", s, left, n)
		case n < p.MaxOutput && p.worstMicros(s.InputTokens, (n+1)*s.Choices) <= left:
			t.Fatalf("%+v with %d left: the cap %d is not the largest", s, left, n)
		}
	}
}

// TestAFitSetsACapOnlyWhereTheCallNamesNoneAndNeedsOne: a call that fits is sent as it
// came (a call without a cap whose model's largest answer fits needs none); one without a
// cap that does not is given the largest that fits, unless that is below the smallest its
// provider takes; one whose own cap does not fit is refused, never lowered behind its
// client's back.
func TestAFitSetsACapOnlyWhereTheCallNamesNoneAndNeedsOne(t *testing.T) {
	t.Parallel()
	prices := DefaultPrices()
	large := CallSize{Model: "fake-large", InputTokens: 100}
	for _, c := range []struct {
		name   string
		s      CallSize
		left   int64
		minCap int64
		want   fit
	}{
		{"no cap, the largest answer fits", large, 100_000, 1, fit{}},
		{"no cap, the largest answer does not fit", large, 10_000, 1, fit{setCap: 1225}},
		{"no cap, below the provider's smallest", large, 300, 16, fit{worst: 200 + 16*8, output: 16, largest: 12, refused: true}},
		{"a cap that fits", CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 1000}, 10_000, 1, fit{}},
		{"a cap that does not fit", CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 4000}, 10_000, 1, fit{worst: 200 + 4000*8, output: 4000, largest: 1225, refused: true}},
	} {
		if got := prices.fitCall(c.s, c.left, c.minCap, true); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// fixedSpends is a spend store whose tenant has budget and spent.
type fixedSpends struct{ budget, spent int64 }

func (f fixedSpends) LLMSpend(context.Context, int64, time.Time, string) (int64, int64, error) {
	return f.budget, f.spent, nil
}

// TestATooSmallRefusalSaysWhatFits: the refusal of a call that does not fit what is left
// names its worst case, what is left and the largest cap that fits, says nothing of it was
// sent, and asks for a retry at midnight UTC; a call over the whole budget of a day says so
// to its caller (ErrOverWholeBudget), as waiting does not help it.
// ops rule 12
func TestATooSmallRefusalSaysWhatFits(t *testing.T) {
	t.Parallel()
	clock := ops.NewManualClock(time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC))
	b := NewBudgets(fixedSpends{budget: 1_000_000, spent: 990_000}, DefaultPrices(), clock, 0)
	_, err := b.CheckCall(context.Background(), 1, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 100_000}, "max_tokens")
	msg := ops.ErrorMessage(err)
	for _, want := range []string{"may cost up to 0.032968 USD", "answer of up to 4096 tokens", "0.01 USD left of", "budget of 1.00 USD", "largest max_tokens that fits what is left is 1225",
		"nothing of it was sent", "resets at 2026-12-08T00:00:00Z"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q: %s", want, msg)
		}
	}
	if p, _ := ProblemOf(err); ops.ErrorReason(err) != ReasonBudgetTooSmall || p.RetryAfter != 6*time.Hour {
		t.Errorf("%s, Retry-After %s; want %s until midnight", ops.ErrorReason(err), p.RetryAfter, ReasonBudgetTooSmall)
	}
	if errors.Is(err, ErrOverWholeBudget) {
		t.Errorf("a call within the whole budget is told it is over it")
	}
	whole := NewBudgets(fixedSpends{budget: 10_000}, DefaultPrices(), clock, 0)
	_, err = whole.CheckCall(context.Background(), 1, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 4000}, "max_tokens")
	if !errors.Is(err, ErrOverWholeBudget) {
		t.Errorf("a call over the whole budget: %v, want ErrOverWholeBudget", err)
	}
	if _, err := whole.CheckCall(context.Background(), 1, CallSize{Model: "fake-large", InputTokens: 100, OutputCap: 1000}, "max_tokens"); err != nil {
		t.Errorf("a call that fits: %v", err)
	}
}

// TestSettlesCapKeepsTheClientsBytes: the cap Settle sets is added after the body's last
// member, the client's bytes before it as they came; a cap the client wrote as null is set
// in the decoded body.
func TestSettlesCapKeepsTheClientsBytes(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"fake-large",  "messages":[{"role":"user","content":"hi"}]}`)
	req, err := parseRequest(chatAPI{}, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(withOutputCap(req, body, "max_completion_tokens", 77)); got != `{"model":"fake-large",  "messages":[{"role":"user","content":"hi"}],"max_completion_tokens":77}` {
		t.Errorf("the capped body: %s", got)
	}
	nulled := []byte(`{"model":"fake-large","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":null}`)
	if req, err = parseRequest(chatAPI{}, nulled, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(withOutputCap(req, nulled, "max_completion_tokens", 77)); strings.Count(got, "max_completion_tokens") != 1 || !strings.Contains(got, `"max_completion_tokens":77`) {
		t.Errorf("a cap written as null: %s", got)
	}
}
