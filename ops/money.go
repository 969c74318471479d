package ops

import (
	"fmt"
	"strings"
)

// Money on screen. Amounts are stored in the currency's minor unit, as Stripe takes them
// (amount_cents: 3800 is $38.00, 500 is ¥500), and Settle shows every amount one way, on
// every page, in CSV cells holding formatted amounts and in messages: the number in the
// currency's major unit with its minor digits, a space and the ISO code in capitals —
// "38.00 USD", "500 JPY", "-0.05 EUR", "1.500 KWD".

// zeroDecimal are Stripe's zero-decimal currencies: their minor unit is the unit itself.
var zeroDecimal = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true, "mga": true,
	"pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true,
}

// threeDecimal are Stripe's three-decimal currencies: a minor unit is a thousandth.
var threeDecimal = map[string]bool{"bhd": true, "jod": true, "kwd": true, "omr": true, "tnd": true}

// MinorUnits returns the number of decimal places of currency's minor unit: 0 for Stripe's
// zero-decimal currencies, 3 for its three-decimal ones, else 2.
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

// FormatMoney writes an amount in the currency's minor unit as people read it: "38.00 USD",
// "500 JPY". It is the one money formatter; views get its strings. An unknown or empty
// currency counts two decimals and shows "?" for the code.
func FormatMoney(minor int64, currency string) string {
	return formatScaled(minor, MinorUnits(currency), currency)
}

// MicrosPerMinor is how many micro-units make one minor unit of a currency: recon.Money
// keeps a refund of 3800 cents as 38,000,000 and an LLM cost of 12 micro-dollars as 12.
const MicrosPerMinor = 10_000

// FormatMicros writes an amount in micro-units (MicrosPerMinor to the minor unit) like
// FormatMoney, rounded to the minor unit; a non-zero amount below one minor unit (an LLM
// call costs fractions of a cent) keeps its digits instead of showing as zero.
func FormatMicros(micros int64, currency string) string {
	d := MinorUnits(currency)
	if micros != 0 && micros > -MicrosPerMinor && micros < MicrosPerMinor {
		return formatScaled(micros, d+4, currency)
	}
	half := int64(MicrosPerMinor / 2)
	if micros < 0 {
		half = -half
	}
	return formatScaled((micros+half)/MicrosPerMinor, d, currency)
}

// MajorUnits returns an amount in micro-units in the currency's major unit, for charts.
func MajorUnits(micros int64, currency string) float64 {
	v := float64(micros) / MicrosPerMinor
	for range MinorUnits(currency) {
		v /= 10
	}
	return v
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
