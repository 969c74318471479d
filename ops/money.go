package ops

import (
	"fmt"
	"sort"
	"strings"
)

// Money on screen. Amounts are stored in the currency's minor unit, as Stripe takes them
// (amount_cents: 3800 is $38.00, 500 is ¥500), and Settle shows every amount one way, on
// every page, in CSV cells holding formatted amounts and in messages: the number in the
// currency's major unit with its minor digits, a space and the ISO code in capitals —
// "38.00 USD", "500 JPY", "-0.05 EUR", "1.500 KWD".

// The minor units of currencies whose minor unit is not a hundredth, as ISO 4217 and Stripe
// count them; every other code, known or not, has two decimals. A refund's amount is in its
// currency's minor unit as Stripe takes it, and an LLM cost in micro-units of the price
// table's currency; both are shown with these decimals.

// zeroDecimal have no minor unit: their amounts are whole units (Stripe's zero-decimal
// currencies).
var zeroDecimal = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true, "mga": true,
	"pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true,
}

// threeDecimal have a minor unit of a thousandth (the dinars, the rials of Oman).
var threeDecimal = map[string]bool{"bhd": true, "iqd": true, "jod": true, "kwd": true, "lyd": true, "omr": true, "tnd": true}

// MinorUnits returns the number of decimal places of currency's minor unit: 0 for the
// zero-decimal currencies, 3 for the three-decimal ones, else 2.
func MinorUnits(currency string) int {
	c := strings.ToLower(strings.TrimSpace(currency))
	switch {
	case zeroDecimal[c]:
		return 0
	case threeDecimal[c]:
		return 3
	}
	return 2
}

// CurrenciesWithMinorUnits lists, in order, the lower-case codes whose minor unit has that
// many decimal places (0 or 3; every other code has 2), for the store layer to convert an
// amount in the minor unit to micro-units as MinorToMicros does.
func CurrenciesWithMinorUnits(decimals int) []string {
	set := map[int]map[string]bool{0: zeroDecimal, 3: threeDecimal}[decimals]
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// FormatMoney writes an amount in the currency's minor unit as people read it: "38.00 USD",
// "500 JPY". It is the one money formatter; views get its strings. An unknown or empty
// currency counts two decimals and shows "?" for the code.
func FormatMoney(minor int64, currency string) string {
	return formatScaled(minor, MinorUnits(currency), currency)
}

// MicrosPerUnit is how many micro-units make one unit of a currency: amounts counted finer
// than the minor unit (LLM costs, budgets, recon.Money) are millionths of the unit, so a
// budget of "25" is 25,000,000 whatever the currency's minor unit.
const MicrosPerUnit = 1_000_000

// MicrosPerMinor returns how many micro-units make one minor unit of currency: 10,000 to the
// cent, 1,000,000 to the yen, 1,000 to the fils.
func MicrosPerMinor(currency string) int64 {
	n := int64(MicrosPerUnit)
	for range MinorUnits(currency) {
		n /= 10
	}
	return n
}

// MinorToMicros returns an amount in the currency's minor unit (a refund's amount_cents) in
// micro-units, so that refunds and LLM costs add up: 3800 cents is 38,000,000, ¥500 is
// 500,000,000.
func MinorToMicros(minor int64, currency string) int64 {
	return minor * MicrosPerMinor(currency)
}

// FormatMicros writes an amount in micro-units (millionths of the currency's unit) like
// FormatMoney, rounded half away from zero to the currency's minor unit: whole yen, cents,
// thousandths of a dinar. A non-zero amount below one minor unit (an LLM call costs
// fractions of a cent) keeps its six decimals instead of showing as zero.
func FormatMicros(micros int64, currency string) string {
	per := MicrosPerMinor(currency)
	if micros != 0 && micros > -per && micros < per {
		return formatScaled(micros, 6, currency)
	}
	half := per / 2
	if micros < 0 {
		half = -half
	}
	return formatScaled((micros+half)/per, MinorUnits(currency), currency)
}

// FormatMicrosExact writes an amount in micro-units as FormatMicros does when the currency's
// minor unit holds it exactly, and with all six decimals otherwise: a figure a client
// compares with another (a call's worst case and what is left of a budget) must not round
// to the same text when the amounts differ.
func FormatMicrosExact(micros int64, currency string) string {
	if micros%MicrosPerMinor(currency) == 0 {
		return FormatMicros(micros, currency)
	}
	return formatScaled(micros, 6, currency)
}

// MajorUnits returns an amount in micro-units in the currency's major unit, for charts.
func MajorUnits(micros int64, _ string) float64 {
	return float64(micros) / MicrosPerUnit
}

// formatScaled writes n / 10^decimals with exactly that many decimals and the code.
func formatScaled(n int64, decimals int, currency string) string {
	code := strings.ToUpper(strings.TrimSpace(currency))
	if code == "" {
		code = "?"
	}
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	if decimals == 0 {
		return fmt.Sprintf("%s%d %s", sign, u, code)
	}
	p := uint64(1)
	for range decimals {
		p *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s", sign, u/p, decimals, u%p, code)
}
