package llm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/settle-dev/settle/ops"
)

// ReasonBudgetTooSmall is the reason of a new call of a tenant with an LLM budget refused
// with 429 because its worst case costs more than what is left of the day's budget.
const ReasonBudgetTooSmall = "llm_budget_too_small"

// ReasonBudgetHeld is the reason of a new call refused with 429 and a Retry-After of seconds
// because its worst case fits what is left of the day's budget but not beside what the
// tenant's calls in flight hold of it: a burst on a budget that pays for each call alone,
// over when they end. It is a reason of its own, not ReasonBudgetTooSmall, so that neither
// the built-in rule of a tenant stopped by what is left nor the count of such refusals
// (Budgets.Refused) takes a burst for a stop.
const ReasonBudgetHeld = "llm_budget_held"

// ErrOverWholeBudget is wrapped by a ReasonBudgetTooSmall refusal of a call whose worst case
// costs more than the tenant's whole budget of a day: waiting for midnight does not help it,
// only a smaller call does.
var ErrOverWholeBudget = errors.New("the call's worst case is over the whole budget of a day")

// ReasonOverWholeBudget is the reason of a pipeline job refused at submission (422), or
// failed by its worker, because its generation's worst case costs more than its tenant's
// whole LLM budget of a day (ErrOverWholeBudget): no day's budget pays for it. The budgets
// count such refusals (Refused) beside the others.
const ReasonOverWholeBudget = "over_whole_llm_budget"

// maxOutputCap bounds an output cap as the budget counts it: a trillion tokens, beyond any
// model, so that a cap a client writes as 1e30 stays a number the arithmetic holds.
const maxOutputCap = 1 << 40

// CallSize is what a new call may ask of a budget at most, read from its request.
type CallSize struct {
	Model string
	// InputTokens bounds the call's prompt tokens from above: the request body's bytes. A
	// tokenizer's token stands for at least one byte of the text or one token id written in
	// the body, so no prompt the body spells out has more tokens than the body has bytes.
	// What the body only names (an image by its address, a file or an earlier response by
	// its id) is not bounded so.
	InputTokens int64
	// OutputCap is the output tokens per answer the request names; 0 when it names none.
	OutputCap int64
	// Choices is how many answers it asks for, each up to OutputCap (a chat completion's
	// n); 0 counts as 1.
	Choices int64
	// NoOutput says its answer is not tokens (embeddings): its input is its whole cost.
	NoOutput bool
}

// choices is s's answers, at least one.
func (s CallSize) choices() int64 { return max(s.Choices, 1) }

// worstInput is the most one prompt token of p may cost: its input price, or a cache
// write's where that is dearer (Anthropic bills a prompt written to its cache above its
// input price, and the client chooses what is cached).
func (p Price) worstInput() float64 { return max(p.Input, p.CachedInput, p.CacheWrite, p.CacheWrite1h) }

// outputBound is the output tokens per answer that bound s's cost: its cap, or the model's
// own largest answer where that is smaller; -1 when neither is known (nothing bounds it).
func (p Price) outputBound(s CallSize) int64 {
	switch {
	case s.NoOutput:
		return 0
	case s.OutputCap > 0 && p.MaxOutput > 0:
		return min(s.OutputCap, p.MaxOutput)
	case s.OutputCap > 0:
		return min(s.OutputCap, maxOutputCap)
	case p.MaxOutput > 0:
		return p.MaxOutput
	}
	return -1
}

// worstMicros is the most a call of price p with input tokens and output tokens (all its
// answers') may cost, in micro-units rounded up; a price per million tokens is a price per
// token in micro-units.
func (p Price) worstMicros(input, output int64) int64 {
	c := float64(input)*p.worstInput() + float64(output)*p.Output
	if !(c < 1<<62) {
		return 1 << 62
	}
	return int64(math.Ceil(c))
}

// WorstCaseMicros is the most a call of size s may cost, in micro-units of the table's
// currency: every input token at the dearest rate the model bills a prompt token, every
// output token its answers may have at the output price. ok is false when the table does
// not price the model, or nothing bounds the call's output (it names no cap and the table
// knows no largest answer of the model).
func (t *PriceTable) WorstCaseMicros(s CallSize) (micros int64, ok bool) {
	p, priced := t.lookup(s.Model)
	out := p.outputBound(s)
	if !priced || out < 0 {
		return 0, false
	}
	return p.worstMicros(s.InputTokens, out*s.choices()), true
}

// LargestOutputCap is the largest output cap per answer a call of size s (its cap aside) may
// name with its worst case within left micro-units: -1 when its input alone does not fit,
// or the table does not price its model; the model's largest answer (or maxOutputCap) when
// its output costs nothing.
func (t *PriceTable) LargestOutputCap(s CallSize, left int64) int64 {
	p, ok := t.lookup(s.Model)
	if !ok || p.worstMicros(s.InputTokens, 0) > left {
		return -1
	}
	ceiling := int64(maxOutputCap)
	if p.MaxOutput > 0 {
		ceiling = p.MaxOutput
	}
	if p.Output <= 0 {
		return ceiling
	}
	room := float64(left) - float64(s.InputTokens)*p.worstInput()
	n := min(int64(room/(p.Output*float64(s.choices()))), ceiling)
	// The division's rounding may leave a token too many: the worst case decides.
	for n > 0 && p.worstMicros(s.InputTokens, n*s.choices()) > left {
		n--
	}
	return n
}

// fit is what a budget's check decides of a new call of size s with left micro-units left:
// nothing to change (cap 0, nil), the cap Settle sets on a call that names none (setCap),
// or a refusal.
type fit struct {
	worst   int64 // the call's worst case, as refused
	output  int64 // the output tokens per answer its worst case counts
	largest int64 // the largest cap that fits, -1 when the input alone does not fit
	setCap  int64
	refused bool
	hold    int64 // the worst case held while an admitted call runs (Budgets.fitNew)
}

// fitCall decides a new call of size s against left; minCap is the smallest cap its
// provider takes (a Responses request's is 16), canSet says Settle may set a cap on a call
// that names none.
func (t *PriceTable) fitCall(s CallSize, left, minCap int64, canSet bool) fit {
	if worst, ok := t.WorstCaseMicros(s); ok && worst <= left {
		return fit{}
	}
	largest := t.LargestOutputCap(s, left)
	if s.OutputCap == 0 && !s.NoOutput {
		if canSet && largest >= minCap {
			return fit{setCap: largest}
		}
		// Not even the smallest cap its provider takes fits: that is the call it is refused as.
		return fit{worst: t.worstWithCap(s, minCap), output: minCap, largest: largest, refused: true}
	}
	p, _ := t.lookup(s.Model)
	out := p.outputBound(s)
	return fit{worst: p.worstMicros(s.InputTokens, out*s.choices()), output: out, largest: largest, refused: true}
}

// DayFit is what a tenant's whole LLM budget of a day says of a new call, checked as
// CheckCall checks it against what is left (its output cap s.OutputCap, none set by Settle).
type DayFit struct {
	// Over says its worst case costs more than the whole budget: CheckCall refuses it
	// whatever was spent, wrapping ErrOverWholeBudget, so no day's budget pays for it.
	Over bool
	// Worst is that worst case in micro-units, Output the output tokens per answer it counts.
	Worst, Output int64
	// LargestCap is the largest output cap per answer that fits the budget with its input, -1
	// when its input alone does not; LargestInput the most input tokens (body bytes) that
	// fit with its output, -1 when its output alone does not.
	LargestCap, LargestInput int64
}

// FitADay is the DayFit of a new call of size s against a budget of a day, so that what
// takes calls to send later (a pipeline job) can refuse at once a call that CheckCall
// would refuse on every day.
func (t *PriceTable) FitADay(s CallSize, budget int64) DayFit {
	f := t.fitCall(s, budget, 1, false)
	if !f.refused || f.worst <= budget {
		return DayFit{}
	}
	return DayFit{Over: true, Worst: f.worst, Output: f.output, LargestCap: f.largest,
		LargestInput: t.largestInput(s, f.output, budget)}
}

// largestInput is the most input tokens a call of size s with output tokens per answer may
// have with its worst case within left micro-units; -1 when its output alone does not fit.
func (t *PriceTable) largestInput(s CallSize, output, left int64) int64 {
	p, ok := t.lookup(s.Model)
	out := output * s.choices()
	if !ok || p.worstMicros(0, out) > left {
		return -1
	}
	if p.worstInput() <= 0 {
		return maxOutputCap
	}
	n := min(int64((float64(left)-float64(out)*p.Output)/p.worstInput()), maxOutputCap)
	// The division's rounding may leave a token too many: the worst case decides.
	for n > 0 && p.worstMicros(n, out) > left {
		n--
	}
	return max(n, 0)
}

// worstWithCap is the worst case of s with an output cap of cap per answer.
func (t *PriceTable) worstWithCap(s CallSize, cap int64) int64 {
	p, _ := t.lookup(s.Model)
	return p.worstMicros(s.InputTokens, max(cap, 0)*s.choices())
}

// capName is how a call's client sets its output cap, for a refusal's advice: field, the
// request's field, or, for a pipeline job's generation, profile, the model profile whose
// max_tokens it is; a job's client names a profile, never the number.
type capName struct{ field, profile string }

// tooSmall is the refusal (ReasonBudgetTooSmall, 429 until the budget resets) of a call
// whose worst case f.worst does not fit what sp leaves; name says how its client sets the
// call's output cap (and so whether it is a job's generation), minCap is the smallest its
// provider takes. It names the worst case, what is left, and the largest cap that fits, so
// the client can lower it.
func (b *Budgets) tooSmall(f fit, s CallSize, sp spendNow, name capName, minCap int64) error {
	left := sp.budget - sp.spent
	money := func(m int64) string { return ops.FormatMicrosExact(m, b.currency) }
	refused := name.said()
	what := refused.input(s.InputTokens)
	switch {
	case s.NoOutput:
	case s.OutputCap == 0:
		what += fmt.Sprintf(", and an answer of %d tokens, the fewest its provider takes", f.output)
	case s.choices() > 1:
		what += fmt.Sprintf(", and %d answers of up to %d tokens each", s.choices(), f.output)
	default:
		what += fmt.Sprintf(", and an answer of up to %d tokens", f.output)
	}
	inputAlone := f.largest < 0 || s.NoOutput || f.largest < minCap
	var advice string
	switch {
	case name.profile != "":
		advice = profileAdvice(name.profile, f.largest, inputAlone)
	case inputAlone:
		advice = "Its input alone does not fit what is left with an answer: send a shorter input, or wait until the budget resets."
	default:
		advice = fmt.Sprintf("The largest %s that fits what is left is %d; send that or less.", name.field, f.largest)
	}
	var err error
	if f.worst > sp.budget {
		err = ErrOverWholeBudget
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonBudgetTooSmall,
		Err: errors.Join(&Problem{RetryAfter: sp.resets.Sub(sp.now)}, err),
		Message: fmt.Sprintf("%s may cost up to %s (%s), more than the %s left of your tenant's LLM budget of %s a day "+
			"(%s spent so far today, UTC); %s %s The budget resets at %s.",
			refused.what(), money(f.worst), what, money(max(left, 0)), money(sp.budget), money(sp.spent), refused.did, advice,
			sp.resets.Format(time.RFC3339))}
}

// profileAdvice is a refused generation's advice to the job's client, which sets its output
// cap by naming a model profile: largest is the most max_tokens that fits what is left,
// inputAlone says not even an answer of the fewest tokens fits beside its prompt.
func profileAdvice(profile string, largest int64, inputAlone bool) string {
	fits := fmt.Sprintf("a profile's max_tokens of at most %d fits what is left beside this prompt", largest)
	if inputAlone {
		fits = "this prompt alone leaves no room for an answer"
	}
	return fmt.Sprintf("Its max_tokens are model profile %q's, and %s: to fit, choose a model profile with fewer max_tokens "+
		"or a cheaper model, or send a shorter document.", profile, fits)
}

// capRule is how an API's requests name their output cap, for the budget's check.
type capRule struct {
	// names are the fields that cap the tokens of an answer; the largest named counts, as
	// the provider may read either.
	names []string
	// set is the field Settle names on a request of a tenant with a budget that names none;
	// "" where every request names one.
	set string
	// min is the smallest cap the provider takes.
	min int64
	// choices is the field that asks for several answers, each up to the cap; "" for none.
	choices string
	// noOutput says the answers are not tokens (embeddings).
	noOutput bool
}

// size reads the CallSize of req, body being its bytes: a cap or a count of answers that is
// no positive whole number is refused, as the provider would refuse it, before anything is
// opened.
func (r capRule) size(req *request, body []byte) (s CallSize, field string, err error) {
	s = CallSize{Model: req.Model, InputTokens: int64(len(body)), NoOutput: r.noOutput}
	field = r.set
	for _, name := range r.names {
		n, named, err := wholeField(req, name)
		if err != nil {
			return s, "", err
		}
		if named && n > s.OutputCap {
			s.OutputCap, field = n, name
		}
	}
	if r.choices != "" {
		if s.Choices, _, err = wholeField(req, r.choices); err != nil {
			return s, "", err
		}
	}
	return s, field, nil
}

// wholeField reads a top-level field of req that must be a positive whole number, capped at
// maxOutputCap; named is false when it is absent or null.
func wholeField(req *request, name string) (n int64, named bool, err error) {
	raw, ok := req.fields[name]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var f float64
	if unmarshalField(req.fields, name, &f) != nil || f < 1 || f != math.Trunc(f) {
		return 0, false, &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: name + " must be a positive whole number."}
	}
	return int64(min(f, maxOutputCap)), true, nil
}

// withOutputCap is body, the request req's as it goes to the provider, with field set to
// n: added as its last member when the client did not write the field at all, which keeps
// the client's bytes as they were, or set in the decoded body otherwise (a field written as
// null).
func withOutputCap(req *request, body []byte, field string, n int64) []byte {
	member := strconv.Quote(field) + ":" + strconv.FormatInt(n, 10)
	if _, written := req.fields[field]; !written {
		if b, ok := appendMember(body, member); ok {
			return b
		}
	}
	return setMember(body, field, []byte(strconv.FormatInt(n, 10)))
}
