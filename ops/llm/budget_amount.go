package llm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// MaxBudgetMicros is the largest LLM budget a day: a billion units of the price table's
// currency, far above any tenant's spend; a larger one is a slip, and its micro-units would
// come near the largest integer the database holds.
const MaxBudgetMicros = 1_000_000_000 * 1_000_000

// ParseBudget reads a tenant's LLM budget per UTC day as people give it, on the command line
// or in the dashboard's form: an amount in units of the price table's currency, with up to
// six decimals (a micro-unit, as costs are counted), into micro-units; "off" is 0, no budget.
// Anything else is refused with an EINVALID error whose message starts with the value quoted,
// so that each caller may say where the value came from.
func ParseBudget(v string) (int64, error) {
	if v == "off" {
		return 0, nil
	}
	q := quoteBudget(v)
	bad := ops.Errorf(ops.EINVALID, "%s is not an amount above zero such as 25 or 12.50 (in the currency of the price table, SETTLE_LLM_PRICES), or off", q)
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" || len(frac) > 6 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, bad
	}
	over := ops.Errorf(ops.EINVALID, "%s is over a billion a day; give a smaller amount, or off", q)
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > MaxBudgetMicros/1_000_000 {
		return 0, over
	}
	f, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	micros := w*1_000_000 + f
	switch {
	case micros > MaxBudgetMicros:
		// A billion and a fraction: within the whole units' bound, over the budget's.
		return 0, over
	case micros <= 0:
		return 0, bad
	}
	return micros, nil
}

// quoteBudget quotes a refused budget for its message, cut to a length a line holds: a
// paste into the form may be any length.
func quoteBudget(v string) string {
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}

// BudgetAmount writes micro-units as the amount ParseBudget takes: 25, 12.5, 0.000001.
func BudgetAmount(micros int64) string {
	s := strconv.FormatInt(micros/1_000_000, 10)
	if f := micros % 1_000_000; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	return s
}
