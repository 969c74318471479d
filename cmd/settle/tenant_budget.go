package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// tenantBudgetHow is the usage of 'settle tenant budget'.
const tenantBudgetHow = "settle tenant budget NAME --budget AMOUNT|off"

// parseBudget reads --budget as the dashboard's form reads a budget (llm.ParseBudget), saying
// so on one line.
func parseBudget(v string) (int64, error) {
	micros, err := llm.ParseBudget(v)
	if err != nil {
		return 0, usagef("tenant budget: --budget %s", ops.ErrorMessage(err))
	}
	return micros, nil
}

// readTenantBudgetCommand reads 'tenant budget NAME --budget …': the name may come before or
// after the flag, which is given once.
func readTenantBudgetCommand(cfg Config, args []string) (Config, []string, error) {
	fs := flag.NewFlagSet(cfg.Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	budget := fs.String("budget", "", "what the tenant's LLM calls may cost per UTC day, in the price table's currency; off for no budget")
	name, err := parseTenantCommand(fs, args, tenantBudgetHow)
	switch {
	case err != nil:
		return cfg, nil, err
	case name == "":
		return cfg, nil, usagef("tenant budget: name the tenant: %s", tenantBudgetHow)
	case fs.NFlag() == 0:
		// Without --budget the command would change nothing: most likely it was typed to
		// look at the budget, which 'tenant list' shows.
		return cfg, nil, usagef("tenant budget: give --budget AMOUNT, or --budget off to clear it; 'settle tenant list' shows %s's budget", name)
	}
	micros, err := parseBudget(*budget)
	cfg.Tenant, cfg.LLMBudgetMicros = name, micros
	return cfg, nil, err
}

// tenantBudget sets or clears a tenant's LLM budget per UTC day and prints what it has now;
// the audit log names the command line as the actor. Servers apply it once their cache of
// the tenant's token is renewed, within seconds.
func tenantBudget(ctx context.Context, cfg Config, stdout io.Writer) error {
	currency, err := tenantCurrency(cfg)
	if err != nil {
		return err
	}
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := db.SetLLMBudget(ctx, cfg.Tenant, cfg.LLMBudgetMicros, "cli", time.Now())
	if err != nil {
		return err
	}
	now := "no LLM budget: its calls are not capped"
	if b := c.Tenant.LLMBudgetMicros; b > 0 {
		now = "an LLM budget of " + ops.FormatMicrosExact(b, currency) + " a UTC day; new calls past it are refused with 429 until the next midnight UTC"
	}
	if !c.Changed {
		now += "; nothing changed"
	}
	fmt.Fprintf(stdout, "tenant %s has %s\n", c.Tenant.Name, now)
	return nil
}

// budgetLine is a tenant's LLM budget in 'tenant list', in currency.
func budgetLine(t *ops.Tenant, currency string) string {
	if t.LLMBudgetMicros <= 0 {
		return "off"
	}
	return ops.FormatMicrosExact(t.LLMBudgetMicros, currency) + "/day"
}

// tenantCurrency is the currency tenants' LLM budgets are counted in: that of the price table
// the servers cost calls with (SETTLE_LLM_PRICES, read by the servers' loader). A table the
// servers would refuse is a mistake in the configuration, refused before the database is
// opened, so nothing is read or changed under a currency nobody can name.
func tenantCurrency(cfg Config) (string, error) {
	prices, err := cfg.LLM.prices()
	if err != nil {
		return "", usagef("%s: %v", envLLMPrices.Name, err)
	}
	return prices.CurrencyOf(), nil
}
