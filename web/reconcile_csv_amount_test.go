package web

import "testing"

// TestTheExportsAmountsAreInTheCurrencysOwnUnits: an export cell is a plain number in the
// currency's major unit (ops rule 12: no amount says more, or other, than the ledger holds):
// two decimals for dollars and euros, none for yen, whose minor unit is the yen itself, three
// for dinars, and
// the fractions of a cent an LLM call costs kept rather than rounded away.
func TestTheExportsAmountsAreInTheCurrencysOwnUnits(t *testing.T) {
	for _, c := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{38_000_000, "usd", "38.00"},
		{12_500_000, "eur", "12.50"},
		{1_234, "usd", "0.001234"},
		{500_000_000, "jpy", "500"},
		{500_012_300, "jpy", "500.0123"},
		{1_500_000, "kwd", "1.500"},
		{1_234_500, "kwd", "1.2345"},
		{-1_000_000, "usd", "-1.00"},
		{0, "usd", "0.00"},
	} {
		if got := plainAmount(c.micros, c.currency); got != c.want {
			t.Errorf("plainAmount(%d, %s) = %s, want %s", c.micros, c.currency, got, c.want)
		}
	}
}
