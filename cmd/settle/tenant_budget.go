package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// tenantBudgetHow is the usage of 'settle tenant budget'.
const tenantBudgetHow = "settle tenant budget NAME --budget AMOUNT|off"

// maxBudgetMicros is the largest budget a day: a billion units of the price table's
// currency, far above any tenant's spend; a larger one is a slip, and its micro-units would
// come near the largest integer the database holds.
const maxBudgetMicros = 1_000_000_000 * 1_000_000

// parseBudget reads an amount in units of the price table's currency, with up to six
// decimals (a micro-unit, as costs are counted), into micro-units; "off" is 0, no budget.
func parseBudget(v string) (int64, error) {
	if v == "off" {
		return 0, nil
	}
	bad := usagef("tenant budget: --budget %q is not an amount above zero such as 25 or 12.50 (in the currency of the price table, SETTLE_LLM_PRICES), or off", v)
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" || len(frac) > 6 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, bad
	}
	over := usagef("tenant budget: --budget %q is over a billion a day; give a smaller amount, or off", v)
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > maxBudgetMicros/1_000_000 {
		return 0, over
	}
	f, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	micros := w*1_000_000 + f
	switch {
	case micros > maxBudgetMicros:
		// A billion and a fraction: within the whole units' bound, over the budget's.
		return 0, over
	case micros <= 0:
		return 0, bad
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
		now = "an LLM budget of " + budgetAmount(b) + " a UTC day, in the currency of the servers' price table; " +
			"new calls past it are refused with 429 until the next midnight UTC"
	}
	if !c.Changed {
		now += "; nothing changed"
	}
	fmt.Fprintf(stdout, "tenant %s has %s\n", c.Tenant.Name, now)
	return nil
}

// budgetAmount writes micro-units as the amount 'tenant budget' takes: 25, 12.5, 0.000001.
func budgetAmount(micros int64) string {
	s := strconv.FormatInt(micros/1_000_000, 10)
	if f := micros % 1_000_000; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	return s
}

// budgetLine is a tenant's LLM budget in 'tenant list'.
func budgetLine(t *ops.Tenant) string {
	if t.LLMBudgetMicros <= 0 {
		return "off"
	}
	return budgetAmount(t.LLMBudgetMicros) + "/day"
}
