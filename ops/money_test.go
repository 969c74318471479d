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

func TestFormatMicros(t *testing.T) {
	for _, c := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{38_000_000, "usd", "38.00 USD"}, {5_000_000, "jpy", "500 JPY"}, {-5_000_000, "jpy", "-500 JPY"},
		{38_004_999, "usd", "38.00 USD"}, {38_005_000, "usd", "38.01 USD"}, {-38_005_000, "usd", "-38.01 USD"},
		{12, "usd", "0.000012 USD"}, {-12, "usd", "-0.000012 USD"}, {50, "jpy", "0.0050 JPY"}, {0, "usd", "0.00 USD"},
	} {
		if got := ops.FormatMicros(c.micros, c.currency); got != c.want {
			t.Errorf("FormatMicros(%d, %q) = %q, want %q", c.micros, c.currency, got, c.want)
		}
	}
	if got := ops.MajorUnits(38_000_000, "usd"); got != 38 {
		t.Errorf("MajorUnits usd = %v", got)
	}
	if got := ops.MajorUnits(5_000_000, "jpy"); got != 500 {
		t.Errorf("MajorUnits jpy = %v", got)
	}
	if ops.MinorUnits("JPY") != 0 || ops.MinorUnits("usd") != 2 || ops.MinorUnits("bhd") != 3 {
		t.Error("MinorUnits")
	}
}
