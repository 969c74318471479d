package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settle-dev/settle/ops"
)

// readTenantCommand reads the subcommand of 'settle tenant' and returns the arguments after
// it for the flag set. The words of 'tenant stripe-account NAME acct_…' are taken here, so
// that --clear may come before or after them.
func readTenantCommand(cfg Config, args []string) (Config, []string, error) {
	if len(args) == 0 || (args[0] != "stripe-account" && args[0] != "list" && args[0] != "approvals" && args[0] != "budget") {
		return cfg, args, usagef("unknown command %q; did you mean 'tenant stripe-account', 'tenant approvals', 'tenant budget' or 'tenant list'?",
			strings.Join(append([]string{cfg.Command}, args...), " "))
	}
	cfg.Command += " " + args[0]
	switch cfg.Command {
	case "tenant approvals":
		return readTenantApprovalsCommand(cfg, args[1:])
	case "tenant budget":
		return readTenantBudgetCommand(cfg, args[1:])
	}
	if cfg.Command != "tenant stripe-account" {
		return cfg, args[1:], nil
	}
	var words, flags []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			words = append(words, a)
		}
	}
	switch {
	case len(words) == 0 && slices.ContainsFunc(flags, func(f string) bool { return f == "-h" || f == "-help" || f == "--help" }):
		return cfg, flags, nil // the flag set answers with the usage
	case len(words) == 0:
		return cfg, flags, usagef("tenant stripe-account: name the tenant: %s", stripeAccountHow)
	case len(words) > 2:
		return cfg, flags, usagef("tenant stripe-account: unexpected argument %q; %s", words[2], stripeAccountHow)
	}
	cfg.Tenant = words[0]
	if len(words) == 2 {
		cfg.StripeAccount = words[1]
	}
	return cfg, flags, nil
}

const stripeAccountHow = "settle tenant stripe-account NAME acct_… binds, settle tenant stripe-account NAME --clear unbinds"

// checkStripeAccountArgs refuses an account id together with --clear, neither of them, and
// a malformed account id: mistakes on the command line, refused before the database is
// opened.
func checkStripeAccountArgs(cfg Config) error {
	switch {
	case cfg.ClearStripeAccount && cfg.StripeAccount != "":
		return usagef("tenant stripe-account: give an account id or --clear, not both")
	case !cfg.ClearStripeAccount && cfg.StripeAccount == "":
		return usagef("tenant stripe-account: give the account id (acct_…) to bind, or --clear to unbind")
	case cfg.StripeAccount != "":
		if err := ops.CheckStripeAccount(cfg.StripeAccount); err != nil {
			return usagef("tenant stripe-account: %s", ops.ErrorMessage(err))
		}
	}
	return nil
}

// tenantStripeAccount binds a tenant to a Stripe connected account, or unbinds it; the audit
// log names the command line as the actor. Servers act on it from their next Stripe call.
func tenantStripeAccount(ctx context.Context, cfg Config, stdout io.Writer) error {
	if err := checkStripeAccountArgs(cfg); err != nil {
		return err
	}
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	b, err := db.SetStripeAccount(ctx, cfg.Tenant, cfg.StripeAccount, "cli", time.Now())
	if err != nil {
		return err
	}
	now := b.Tenant.StripeAccount
	switch {
	case !b.Changed && now == "":
		fmt.Fprintf(stdout, "tenant %s is bound to no Stripe account; nothing changed\n", b.Tenant.Name)
	case !b.Changed:
		fmt.Fprintf(stdout, "tenant %s is bound to Stripe account %s already; nothing changed\n", b.Tenant.Name, now)
	case now == "":
		fmt.Fprintf(stdout, "tenant %s is no longer bound to %s: its Stripe calls go to the platform account, for payments whose metadata names it\n",
			b.Tenant.Name, b.Before)
	default:
		fmt.Fprintf(stdout, "tenant %s is bound to Stripe account %s: its refunds, lookups and reconciliation carry Stripe-Account: %s, and only that account's webhooks change its operations\n",
			b.Tenant.Name, now, now)
	}
	return nil
}

// listTenants prints every tenant with the Stripe account it is bound to, its own approval
// settings, its LLM budget per day and what its LLM calls of the UTC day cost so far. It reads
// them in one statement, the tenants page's (TenantDays), within the page's bound.
func listTenants(ctx context.Context, cfg Config, stdout io.Writer) error {
	currency, err := tenantCurrency(cfg)
	if err != nil {
		return err
	}
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	days, err := db.TenantDays(ctx, time.Now(), currency, ops.DefaultSpendBound)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTENANT\tSTRIPE ACCOUNT\tAPPROVALS\tLLM BUDGET\tLLM SPENT TODAY (UTC)\tCREATED")
	for _, d := range days {
		t := d.Tenant
		account := t.StripeAccount
		if account == "" {
			account = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, account, approvalsLine(d.Approvals), budgetLine(t, currency),
			spentLine(d, currency), t.CreatedAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

// spentLine is a tenant's LLM spend of the day in 'tenant list', said to be a floor, or not
// read, where the bounded read did not sum it whole.
func spentLine(d ops.TenantDay, currency string) string {
	switch d.Read {
	case ops.SpendAtLeast:
		return fmt.Sprintf("at least %s (over %d calls)", ops.FormatMicrosExact(d.Spent, currency), ops.DefaultSpendBound.Calls)
	case ops.SpendNotRead:
		return "not read (too slow)"
	}
	return ops.FormatMicrosExact(d.Spent, currency)
}
