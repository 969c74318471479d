package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/retainstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/retain"
)

// RetentionConfig is SETTLE_RETENTION and the flags of 'settle retention run'.
type RetentionConfig struct {
	// Keep is how long a closed operation is kept after its closing; 0 keeps everything.
	Keep time.Duration
	// DryRun makes 'retention run' count what it would remove and remove nothing.
	DryRun bool
}

// twoWordCommands are the commands named by two words, with their second words.
var twoWordCommands = map[string][]string{"fake": {"stripe", "llm", "anthropic"}, "alerts": {"export"}, "retention": {"run"}}

// didYouMean lists the two-word commands of first: 'fake stripe' or 'fake llm'.
func didYouMean(first string, subs []string) string {
	var names []string
	for _, s := range subs {
		names = append(names, "'"+first+" "+s+"'")
	}
	return strings.Join(names, " or ")
}

// loadRolesEnv reads the settings of the background roles that run on one replica at a
// time: SETTLE_ROLE_LEASE and SETTLE_RETENTION. It runs after the LLM and outbox settings,
// which bound the retention from below.
func loadRolesEnv(cfg *Config, e environ) error {
	var err error
	if cfg.RoleLease, err = roleLeaseEnv(e); err != nil {
		return err
	}
	cfg.Retention.Keep, err = retentionEnv(e, *cfg)
	return err
}

// retentionEnv reads SETTLE_RETENTION: "off", days ("400d") or a duration ("9600h"). A
// retention that would remove an operation while something still needs it is refused: the
// provider's key retention (a removed operation frees its intent), an LLM key's TTL plus
// SETTLE_LLM_BODY_KEEP (its replays), SETTLE_OUTBOX_KEEP (delivered events), a week, which
// outlives Stripe's webhook retries, and the reconciler's furthest reach (recon.MaxLookback),
// which reads every provider record of that time and finds its operation.
func retentionEnv(e environ, cfg Config) (time.Duration, error) {
	v := e.get(envRetention)
	if v == "" {
		return retain.DefaultKeep, nil
	}
	keep, err := retain.ParseKeep(v)
	if err != nil {
		return 0, usagef("%s=%s", envRetention.Name, err)
	}
	if keep == 0 {
		return 0, nil
	}
	floors := []struct {
		d   time.Duration
		why string
	}{
		{retain.MinKeep, "a week, which outlives the providers' key retention and Stripe's webhook retries"},
		{cfg.LLM.KeyTTL + cfg.LLM.BodyKeep, "SETTLE_LLM_KEY_TTL plus SETTLE_LLM_BODY_KEEP, while an LLM key still replays"},
		{cfg.OutboxKeep, "SETTLE_OUTBOX_KEEP, while delivered events are kept"},
		// A record naming an operation removed would be raised as an orphan charge.
		{recon.MaxLookback, "how far back the reconciler reads the provider's records after an outage"},
	}
	for _, f := range floors {
		if keep < f.d {
			return 0, usagef("%s=%s is shorter than %s (%s); use at least that, or off", envRetention.Name, v, f.d, f.why)
		}
	}
	return keep, nil
}

// newRetention is the retention role of this configuration: serve's background passes and
// the command's one pass hold the same role, so they never run at once.
func newRetention(cfg Config, db *pg.DB, clock ops.Clock, logger *slog.Logger) *retain.Retention {
	return &retain.Retention{Store: retainstore.New(db), Clock: clock, Keep: cfg.Retention.Keep, Actor: "retention:" + cfg.WorkerID, Logger: logger,
		Role: ops.NewRole(db, clock, logger, retain.Role, ops.NewOwner("retention", cfg.WorkerID), cfg.RoleLease)}
}

// startRetention runs the retention role of serve and demo: its first pass at once (which
// also makes this month's and the next two months' partitions ready), then hourly. Every
// replica may run it; the retention's role lets one act at a time. With
// SETTLE_RETENTION=off it only keeps the partitions ahead.
func (p *Program) startRetention(ctx context.Context) {
	p.goLoop(ctx, newRetention(p.Config, p.DB, p.Clock, p.Logger).Loop())
}

// checkRetentionRun refuses a pass that removes without SETTLE_RETENTION set: the servers
// have theirs in their own environment, and a shell without it would remove, for good, what
// is older than the default, where the servers may keep everything.
func checkRetentionRun(cfg Config, e environ) error {
	if cfg.Retention.DryRun || e.get(envRetention) != "" {
		return nil
	}
	return usagef("retention run: %s is not set; set it as the servers have it (%dd by default, or off), or count with --dry-run",
		envRetention.Name, int(retain.DefaultKeep/(24*time.Hour)))
}

// retentionCmd is 'settle retention run [--dry-run]': one pass now, its progress on stderr
// when it is a terminal, the summary on stdout.
func retentionCmd(ctx context.Context, cfg Config, stdout, stderr io.Writer, logger *slog.Logger) error {
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkClock(ctx, cfg, ops.SystemClock{}, db); err != nil {
		return err
	}
	r := newRetention(cfg, db, ops.SystemClock{}, logger)
	r.Progress = newReporter("retention", stderr, logger)
	rep, err := r.RunOnce(ctx, cfg.Retention.DryRun)
	if err != nil {
		return err
	}
	if rep.Skipped {
		return ops.Errorf(ops.ECONFLICT, "Another replica is running the retention; try again in a few minutes.")
	}
	if cfg.Retention.Keep == 0 {
		fmt.Fprintln(stdout, "retention: SETTLE_RETENTION is off; nothing removed, the partitions of the next months are ready")
		return nil
	}
	fmt.Fprintln(stdout, rep.Summary())
	return nil
}
