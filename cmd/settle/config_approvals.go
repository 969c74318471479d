package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// maxApprovalTTL is the longest a proposed close may wait for its second person. A week
// covers a weekend and a holiday with an on-call rotation to spare; a proposal older than
// that was made on evidence that may no longer hold, and a longer lifetime widens the
// window in which ops rule 13 looks for the admin who created either person's account.
// A value far beyond it is a slip (2400h for 24h).
const maxApprovalTTL = 7 * 24 * time.Hour

// loadApprovalsEnv reads the global four-eyes policy (ops rule 13): SETTLE_APPROVAL_MIN_CENTS
// (unset or off: no threshold), SETTLE_APPROVAL_NOT_EXECUTED (on or off) and
// SETTLE_APPROVAL_TTL. Each tenant's own settings ('settle tenant approvals') override the
// first two.
func loadApprovalsEnv(e environ) (ops.ApprovalPolicy, error) {
	var p ops.ApprovalPolicy
	switch v := strings.TrimSpace(e.get(envApprovalMinCents)); v {
	case "", "off":
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return p, usagef("%s=%q is not a whole number of cents (0 or more) or off", envApprovalMinCents.Name, v)
		}
		p.MinCents = &n
	}
	switch v := strings.TrimSpace(e.get(envApprovalNotExecuted)); v {
	case "", "off":
	case "on":
		p.NotExecuted = true
	default:
		return p, usagef("%s=%q is not on or off", envApprovalNotExecuted.Name, v)
	}
	ttl, err := e.duration(envApprovalTTL, ops.DefaultApprovalTTL)
	if err != nil {
		return p, err
	}
	if ttl < time.Minute {
		return p, usagef("%s=%s is shorter than a minute: nobody could approve a proposal in time", envApprovalTTL.Name, ttl)
	}
	if ttl > maxApprovalTTL {
		return p, usagef("%s=%s is longer than a week: a proposal still open then was made by an earlier on-call rotation, on evidence that may no longer hold", envApprovalTTL.Name, ttl)
	}
	p.TTL = ttl
	return p, nil
}

// tenantApprovalsHow is the usage of 'settle tenant approvals'.
const tenantApprovalsHow = "settle tenant approvals NAME [--min-cents N|off|default] [--not-executed on|off|default]"

// readTenantApprovals turns the flags of 'tenant approvals' into the tenant's settings:
// "default" follows the global setting again.
func readTenantApprovals(name, minCents, notExecuted string) (ops.TenantApprovals, error) {
	var t ops.TenantApprovals
	if name == "" {
		return t, usagef("tenant approvals: name the tenant: %s", tenantApprovalsHow)
	}
	switch minCents {
	case "default":
	case "off":
		t.MinOff = true
	default:
		n, err := strconv.ParseInt(minCents, 10, 64)
		if err != nil || n < 0 {
			return t, usagef("tenant approvals: --min-cents %q is not a whole number of cents (0 or more), off or default", minCents)
		}
		t.MinCents = &n
	}
	switch notExecuted {
	case "default":
	case "on", "off":
		on := notExecuted == "on"
		t.NotExecuted = &on
	default:
		return t, usagef("tenant approvals: --not-executed %q is not on, off or default", notExecuted)
	}
	return t, nil
}

// parseTenantCommand parses the flags of a 'tenant …' command given as fs, each at most
// once, and returns the tenant's name, which may come before or after them; how is the
// usage a mistake's line ends with.
func parseTenantCommand(fs *flag.FlagSet, args []string, how string) (string, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseOnce(fs, args); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return "", usagef("%v; %s", err, how)
		}
		return "", err
	}
	rest := fs.Args()
	if name == "" && len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return "", usagef("%s: unexpected argument %q; %s", fs.Name(), rest[0], how)
	}
	return name, nil
}

// readTenantApprovalsCommand reads 'tenant approvals NAME --min-cents … --not-executed …':
// the name may come before or after the flags.
func readTenantApprovalsCommand(cfg Config, args []string) (Config, []string, error) {
	fs := flag.NewFlagSet(cfg.Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	minCents := fs.String("min-cents", "default", "amount in cents from which a close needs approval; off, or default for the global setting")
	notExecuted := fs.String("not-executed", "default", "on, off, or default: whether every close as not executed needs approval")
	name, err := parseTenantCommand(fs, args, tenantApprovalsHow)
	if err != nil {
		return cfg, nil, err
	}
	// A flag left out keeps the tenant's setting, so without either the command would change
	// nothing: it is a mistake, most likely made to look at the settings.
	if name != "" && fs.NFlag() == 0 {
		return cfg, nil, usagef("tenant approvals: give --min-cents or --not-executed (default follows the global setting again); 'settle tenant list' shows %s's settings", name)
	}
	t, err := readTenantApprovals(name, *minCents, *notExecuted)
	cfg.Tenant, cfg.TenantApprovals = name, t
	cfg.KeepApprovals = pg.KeepApprovals{Min: true, NotExecuted: true}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "min-cents":
			cfg.KeepApprovals.Min = false
		case "not-executed":
			cfg.KeepApprovals.NotExecuted = false
		}
	})
	return cfg, nil, err
}

// tenantApprovals stores the approval settings of a tenant given by flags, keeping the
// others as they are (ops rule 13: a change of the threshold must not drop the tenant's
// setting for closes as not executed), and prints what the tenant has now; the audit log
// names the command line as the actor. Servers apply them from the next close.
func tenantApprovals(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.ChangeTenantApprovals(ctx, cfg.Tenant, cfg.TenantApprovals, cfg.KeepApprovals, "cli", time.Now())
	if err != nil {
		return err
	}
	min, notExec := "the global threshold (SETTLE_APPROVAL_MIN_CENTS)", "the global setting (SETTLE_APPROVAL_NOT_EXECUTED)"
	switch {
	case t.MinOff:
		min = "no threshold"
	case t.MinCents != nil:
		min = fmt.Sprintf("closes from %d cents", *t.MinCents)
	}
	if t.NotExecuted != nil {
		notExec = map[bool]string{true: "always", false: "only by the amount threshold"}[*t.NotExecuted]
	}
	fmt.Fprintf(stdout, "tenant %s: approval needed for %s; closes as not executed need approval: %s\n", cfg.Tenant, min, notExec)
	return nil
}

// approvalsLine is a tenant's own approval settings in 'tenant list': "default" for a
// setting that follows the global one.
func approvalsLine(a *ops.TenantApprovals) string {
	min, notExec := "default", "default"
	if a != nil {
		switch {
		case a.MinOff:
			min = "off"
		case a.MinCents != nil:
			min = strconv.FormatInt(*a.MinCents, 10)
		}
		if a.NotExecuted != nil {
			notExec = map[bool]string{true: "on", false: "off"}[*a.NotExecuted]
		}
	}
	return "min-cents=" + min + ",not-executed=" + notExec
}
