package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/stripe"
)

// ReconcileConfig is what 'settle reconcile' reads from its flags, and how often 'settle
// serve' reconciles in the background.
type ReconcileConfig struct {
	// Interval is the time between background runs of serve and demo; 0 turns them off.
	Interval time.Duration
	// Provider is the provider to reconcile ("stripe").
	Provider string
	// Since makes the window [now-Since, now); From and To (RFC 3339), when given, replace it.
	// SinceGiven says --since was given: with --from it is refused, not dropped.
	Since      time.Duration
	SinceGiven bool
	From, To   string
}

// addReconcileFlags declares the flags of 'settle reconcile'.
func addReconcileFlags(fs *flag.FlagSet, rc *ReconcileConfig) {
	fs.StringVar(&rc.Provider, "provider", "stripe", "the provider to reconcile")
	rc.Since = 24 * time.Hour
	fs.Func("since", "reconcile from this long ago until now, e.g. 24h (default 24h)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("parse error")
		}
		rc.Since, rc.SinceGiven = d, true
		return nil
	})
	fs.StringVar(&rc.From, "from", "", "window start, RFC 3339 (with --to, instead of --since)")
	fs.StringVar(&rc.To, "to", "", "window end, RFC 3339 (default now)")
}

// Window is the window the flags describe, checked against now: a reversed window or one
// reaching into the future is a mistake on the command line.
func (rc ReconcileConfig) Window(now time.Time) (recon.Window, error) {
	w := recon.Window{From: now.Add(-rc.Since), To: now}
	if rc.Since <= 0 && rc.From == "" {
		return w, usagef("reconcile: --since must be a positive duration such as 24h")
	}
	if rc.SinceGiven && rc.From != "" {
		return w, usagef("reconcile: give --since, or --from (and --to), not both")
	}
	if rc.To != "" && rc.From == "" {
		return w, usagef("reconcile: --to needs --from")
	}
	if rc.From != "" {
		from, err := time.Parse(time.RFC3339, rc.From)
		if err != nil {
			return w, usagef("reconcile: --from %q is not an RFC 3339 time such as 2026-03-01T00:00:00Z", rc.From)
		}
		w.From = from
		if rc.To != "" {
			to, err := time.Parse(time.RFC3339, rc.To)
			if err != nil {
				return w, usagef("reconcile: --to %q is not an RFC 3339 time such as 2026-03-02T00:00:00Z", rc.To)
			}
			w.To = to
		}
	}
	if err := recon.CheckWindow(w, now); err != nil {
		return w, usagef("reconcile: %s", ops.ErrorMessage(err))
	}
	return w, nil
}

// runReconcile is 'settle reconcile': one reconciliation of one provider over one window,
// under the same lease as the background reconciler, so it never acts alongside it. Its
// progress goes to stderr (when a terminal) so that stdout keeps only the summary.
func runReconcile(ctx context.Context, cfg Config, rc ReconcileConfig, stdout, stderr io.Writer, logger *slog.Logger) error {
	clock := ops.SystemClock{}
	w, err := rc.Window(clock.Now())
	if err != nil {
		return err
	}
	if err := withinRetention(w, clock.Now(), cfg.Retention.Keep); err != nil {
		return err
	}
	if err := checkProvider(cfg, rc.Provider); err != nil {
		return err
	}
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkClock(ctx, cfg, clock, db); err != nil {
		return err
	}
	// The replicas' retention may be shorter than this command's setting: what the database
	// says was removed decides.
	removed, err := db.RetentionRemovedBefore(ctx)
	if err != nil {
		return err
	}
	if w.From.Before(removed) {
		return usagef("reconcile: the window starts before %s, before which the retention has removed closed operations; start it after that",
			removed.UTC().Format(time.RFC3339))
	}
	var adapter *stripe.Adapter
	if cfg.Stripe.APIKey != "" {
		adapter = cfg.Stripe.adapter(db)
	}
	r := newReconciler(cfg, ops.NewLedger(db, clock), db, adapter, logger, cfg.LLM.anthropicUsage()...)
	r.Progress = newReporter("reconcile "+rc.Provider, stderr, logger)
	rep, err := r.Reconcile(ctx, rc.Provider, w)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", rc.Provider, err)
	}
	if rep.Skipped {
		until := "soon"
		if rep.HeldUntil != nil {
			until = rep.HeldUntil.UTC().Format(time.RFC3339)
		}
		return ops.Errorf(ops.ECONFLICT, "Another reconciler (%s) is running for %s; try again after %s.", rep.Holder, rc.Provider, until)
	}
	fmt.Fprintln(stdout, rep.Summary())
	return nil
}

// checkProvider refuses a provider this configuration does not set up for reconciliation
// (a shell without STRIPE_API_KEY, a misspelt --provider), naming what sets each up, before
// the database is opened.
func checkProvider(cfg Config, provider string) error {
	var set []string
	if cfg.Stripe.APIKey != "" {
		set = append(set, "stripe")
	}
	for _, u := range cfg.LLM.anthropicUsage() {
		set = append(set, u.Name())
	}
	if slices.Contains(set, provider) {
		return nil
	}
	have := "none"
	if len(set) > 0 {
		have = strings.Join(set, ", ")
	}
	return usagef("reconcile: provider %q is not set up here (set up: %s); stripe needs %s, anthropic %s and %s",
		provider, have, envStripeAPIKey.Name, envAnthropicBaseURL.Name, envAnthropicAdminKey.Name)
}

// startReconciler runs the background reconciler of serve and demo, when a provider is set
// up for it and the interval is not zero. Every replica may run it: the lease row lets one
// act at a time, and a run renews it every third of SETTLE_ROLE_LEASE, so a replica killed
// mid-run holds the reconciler up for at most that long.
func (p *Program) startReconciler(ctx context.Context, interval time.Duration, usage ...recon.UsageSource) {
	r := newReconciler(p.Config, p.Ledger, p.DB, p.stripe, p.Logger, usage...)
	if interval <= 0 || len(r.Providers()) == 0 {
		return
	}
	r.Interval = interval
	p.goLoop(ctx, r.Loop())
}

// newReconciler builds the reconciler the configuration allows: Stripe through adapter when
// one is given, and any LLM usage reports given.
func newReconciler(cfg Config, ledger *ops.Ledger, db *pg.DB, adapter *stripe.Adapter, logger *slog.Logger, usage ...recon.UsageSource) *recon.Reconciler {
	r := &recon.Reconciler{Ledger: ledger, Store: reconstore.New(db), Events: db, Leases: db, Owner: ops.NewOwner("reconciler", cfg.WorkerID), Heartbeat: cfg.RoleLease,
		Usage: usage, Logger: logger}
	if adapter != nil {
		r.Refunds = append(r.Refunds, adapter)
	}
	return r
}

// reconcileCmd is 'settle reconcile'.
func reconcileCmd(ctx context.Context, cfg Config, stdout, stderr io.Writer, logger *slog.Logger) error {
	return runReconcile(ctx, cfg, cfg.Reconcile, stdout, stderr, logger)
}

// withinRetention refuses a window that starts before the retention's cutoff: the operations
// of its provider records may be removed, and each such record would be raised as an orphan
// charge, money moved outside Settle, which it is not (ops rule 12).
func withinRetention(w recon.Window, now time.Time, keep time.Duration) error {
	if keep > 0 && w.From.Before(now.Add(-keep)) {
		return usagef("reconcile: the window starts before SETTLE_RETENTION=%s, whose closed operations may be removed; start it after %s",
			keep, now.Add(-keep).UTC().Format(time.RFC3339))
	}
	return nil
}
