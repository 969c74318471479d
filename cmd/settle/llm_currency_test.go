package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/settle-dev/settle/web"
)

// TestTheTenantsPageCountsInThePriceTablesCurrencyWithoutAProvider holds the tenants page to
// the currency the job workers' budgets count in: SETTLE_LLM_PRICES's, read by one function
// (llm.PriceTable.CurrencyOf), whether or not the server has an LLM provider configured. A
// page counting in dollars while the costs are recorded in another currency would show every
// tenant's spend as nothing while its calls are refused for it.
func TestTheTenantsPageCountsInThePriceTablesCurrencyWithoutAProvider(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(`{"currency": "EUR", "models": {"fake-small": {"input": 0.1, "output": 0.4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &web.Server{}
	p := &Program{Config: Config{LLM: LLMConfig{Prices: path}}}
	if _, err := p.wireLLM(srv); err != nil {
		t.Fatal(err)
	}
	if srv.LLMCurrency != "eur" {
		t.Errorf("the tenants page counts in %q without a provider, want the price table's eur", srv.LLMCurrency)
	}
}
