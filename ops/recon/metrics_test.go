package recon_test

import (
	"testing"

	"github.com/settle-dev/settle/ops/recon"
)

func TestMoneyString(t *testing.T) {
	m := recon.Money{}
	m.Add("usd", 38_000_000)
	m.Add("jpy", 500_000_000)
	m.Add("eur", 12)
	if got, want := m.String(), "0.000012 EUR, 500 JPY, 38.00 USD"; got != want {
		t.Errorf("Money.String() = %q, want %q", got, want)
	}
	if got := (recon.Money{}).String(); got != "" {
		t.Errorf("empty Money = %q", got)
	}
}
