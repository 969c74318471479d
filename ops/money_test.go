package ops_test

import (
	"testing"

	"github.com/settle-dev/settle/ops"
)

func TestFormatMoney(t *testing.T) {
	for _, c := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{3800, "usd", "38.00 USD"}, {-5, "eur", "-0.05 EUR"}, {1250, "EUR", "12.50 EUR"}, {0, "usd", "0.00 USD"},
		// Stripe's zero-decimal currencies: the minor unit is the unit.
		{500, "jpy", "500 JPY"}, {500, "JPY", "500 JPY"}, {-500, "jpy", "-500 JPY"}, {1000, "krw", "1000 KRW"},
		{25, "bif", "25 BIF"}, {990, "clp", "990 CLP"}, {7, "djf", "7 DJF"}, {7, "gnf", "7 GNF"}, {7, "kmf", "7 KMF"},
		{7, "mga", "7 MGA"}, {7, "pyg", "7 PYG"}, {7, "rwf", "7 RWF"}, {7, "ugx", "7 UGX"}, {7, "vnd", "7 VND"},
		{7, "vuv", "7 VUV"}, {7, "xaf", "7 XAF"}, {7, "xof", "7 XOF"}, {7, "xpf", "7 XPF"},
		// Three-decimal currencies count thousandths.
		{1500, "kwd", "1.500 KWD"},
		{3800, "", "38.00 ?"},
	} {
		if got := ops.FormatMoney(c.minor, c.currency); got != c.want {
			t.Errorf("FormatMoney(%d, %q) = %q, want %q", c.minor, c.currency, got, c.want)
		}
	}
}

// TestFormatMicros: micro-units are millionths of the currency's major unit whatever its
// minor unit (a budget of 25 yen is 25,000,000, as ParseBudget reads "25"), and an amount is
// shown rounded half away from zero to the currency's minor unit: whole yen, thousandths of
// a dinar, cents elsewhere and for a code the table does not know. ops rule 12: an amount
// shown a hundred times too large says more than Settle knows.
func TestFormatMicros(t *testing.T) {
	for _, c := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{38_000_000, "usd", "38.00 USD"}, {38_004_999, "usd", "38.00 USD"}, {38_005_000, "usd", "38.01 USD"},
		{-38_005_000, "usd", "-38.01 USD"}, {12, "usd", "0.000012 USD"}, {-12, "usd", "-0.000012 USD"}, {0, "usd", "0.00 USD"},
		{12_345_000, "EUR", "12.35 EUR"}, {12_344_999, "eur", "12.34 EUR"},
		// No minor unit: a budget of 25 yen is 25 JPY, never 2500 JPY.
		{25_000_000, "jpy", "25 JPY"}, {25_499_999, "JPY", "25 JPY"}, {25_500_000, "jpy", "26 JPY"}, {-25_500_000, "jpy", "-26 JPY"},
		{500_000_000, "jpy", "500 JPY"}, {0, "jpy", "0 JPY"}, {1_000_000, "krw", "1 KRW"}, {990_000_000, "clp", "990 CLP"},
		// Below one yen the micro-units keep their digits, as fractions of a cent do.
		{1, "jpy", "0.000001 JPY"}, {500_000, "jpy", "0.500000 JPY"}, {-50, "jpy", "-0.000050 JPY"},
		// Three decimals: rounded to the fils, not to a hundredth.
		{1_234_500, "kwd", "1.235 KWD"}, {1_234_499, "KWD", "1.234 KWD"}, {25_000_000, "bhd", "25.000 BHD"},
		{999, "kwd", "0.000999 KWD"}, {1_000, "omr", "0.001 OMR"}, {7_000_000, "iqd", "7.000 IQD"}, {7_000_000, "lyd", "7.000 LYD"},
		// A code the table does not know counts two decimals.
		{12_345_000, "xyz", "12.35 XYZ"}, {12_345_000, "", "12.35 ?"},
	} {
		if got := ops.FormatMicros(c.micros, c.currency); got != c.want {
			t.Errorf("FormatMicros(%d, %q) = %q, want %q", c.micros, c.currency, got, c.want)
		}
	}
	// A refund's amount in the currency's minor unit in micro-units, to be added to LLM costs.
	for _, c := range []struct {
		minor    int64
		currency string
		want     int64
	}{{3800, "usd", 38_000_000}, {500, "jpy", 500_000_000}, {1500, "kwd", 1_500_000}, {-5, "eur", -50_000}} {
		if got := ops.MinorToMicros(c.minor, c.currency); got != c.want {
			t.Errorf("MinorToMicros(%d, %q) = %d, want %d", c.minor, c.currency, got, c.want)
		}
		if got, want := ops.FormatMicros(ops.MinorToMicros(c.minor, c.currency), c.currency), ops.FormatMoney(c.minor, c.currency); got != want {
			t.Errorf("%d %s in micro-units shows %q, in its minor unit %q", c.minor, c.currency, got, want)
		}
	}
	if got := ops.MajorUnits(38_000_000, "usd"); got != 38 {
		t.Errorf("MajorUnits usd = %v", got)
	}
	if got := ops.MajorUnits(500_000_000, "jpy"); got != 500 {
		t.Errorf("MajorUnits jpy = %v", got)
	}
	if got := ops.MajorUnits(1_500_000, "kwd"); got != 1.5 {
		t.Errorf("MajorUnits kwd = %v", got)
	}
	if ops.MinorUnits("JPY") != 0 || ops.MinorUnits("usd") != 2 || ops.MinorUnits("bhd") != 3 || ops.MinorUnits("LYD") != 3 {
		t.Error("MinorUnits")
	}
}
