package rollupstore

import (
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// minorMicros is SQL for an amount in its currency's minor unit (a refund's amount_cents) in
// micro-units of the currency, as ops.MinorToMicros computes it: ¥500 is 500,000,000, not
// 5,000,000, so a refund in yen or dinars adds up with LLM costs and shows as its own amount.
func minorMicros(amount, currency string) string {
	var b strings.Builder
	b.WriteString(amount + " * CASE")
	for _, d := range []int{0, 3} {
		codes := ops.CurrenciesWithMinorUnits(d)
		quoted := make([]string, len(codes))
		for i, c := range codes {
			quoted[i] = "'" + c + "'"
		}
		b.WriteString(" WHEN lower(" + currency + ") IN (" + strings.Join(quoted, ", ") + ") THEN " +
			strconv.FormatInt(ops.MicrosPerMinor(codes[0]), 10))
	}
	b.WriteString(" ELSE " + strconv.FormatInt(ops.MicrosPerMinor("usd"), 10) + " END")
	return "(" + b.String() + ")"
}
