package llm

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/settle-dev/settle/ops"
)

// DefaultBodyKeep is how long prompts and completions are kept past the key's TTL: a week
// to look into a complaint, after which the text of a user's conversation is not Settle's
// to keep.
const DefaultBodyKeep = 7 * 24 * time.Hour

// ReasonAnswerPurged is the reason of a replay whose answer was produced but is no longer
// kept: the purge deleted it, past the key's TTL and the bodies' keep.
const ReasonAnswerPurged = "answer_purged"

// PurgeParams is one pass of the body purge.
type PurgeParams struct {
	Now time.Time
	// Keep is how long bodies outlive the key's TTL: an operation's retention (its key's
	// TTL) for llm_call and llm_job operations, JobTTL for jobs.
	Keep   time.Duration
	JobTTL time.Duration
	// Batch bounds the rows one transaction purges, so a purge holds no long lock.
	Batch int
}

// PurgeReport says what one pass purged.
type PurgeReport struct {
	// Skipped: another replica was purging; nothing was done.
	Skipped    bool
	Operations int
	Jobs       int
}

// PurgeStore deletes the bodies that are due.
type PurgeStore interface {
	// PurgeBodies purges, in transactions of at most p.Batch rows, under a lock that lets
	// one replica act at a time, the request and result of every finished llm_call and
	// llm_job operation created more than its retention plus p.Keep before p.Now, and the
	// document and results of every published or failed job created more than p.JobTTL
	// plus p.Keep before it, stamping each row's purged_at.
	PurgeBodies(ctx context.Context, p PurgeParams) (PurgeReport, error)
}

// Purger is the background role that keeps prompts and completions no longer than the
// key's TTL plus Keep. Every replica may run it; the store lets one act at a time.
type Purger struct {
	Store    PurgeStore
	Clock    ops.Clock
	Keep     time.Duration
	JobTTL   time.Duration
	Interval time.Duration
	Batch    int
	Logger   *slog.Logger

	outages ops.OutageLog
}

// Start purges every Interval (default 10 minutes) until ctx ends.
func (p *Purger) Start(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rep, err := p.RunOnce(ctx)
		switch {
		case ctx.Err() != nil, p.outages.Pass(p.logger(), "body purge", err):
		case err != nil:
			p.logger().Error("body purge failed", "err", err)
		case rep.Operations+rep.Jobs > 0:
			p.logger().Info("purged bodies", "operations", rep.Operations, "jobs", rep.Jobs)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce does one pass.
func (p *Purger) RunOnce(ctx context.Context) (PurgeReport, error) {
	keep, batch := p.Keep, p.Batch
	if keep <= 0 {
		keep = DefaultBodyKeep
	}
	if batch <= 0 {
		batch = 500
	}
	rep, err := p.Store.PurgeBodies(ctx, PurgeParams{Now: p.Clock.Now(), Keep: keep, JobTTL: p.JobTTL, Batch: batch})
	if err != nil {
		return rep, fmt.Errorf("purge bodies: %w", err)
	}
	return rep, nil
}

func (p *Purger) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// purgedError answers a replay of op, whose answer the purge deleted: a 4xx problem of its
// own, not an internal error, since the answer was produced and billed once.
func purgedError(op *ops.Operation) error {
	return &ops.Error{Code: ops.ENOTFOUND, Reason: ReasonAnswerPurged,
		Message: fmt.Sprintf("The answer of operation %s was produced, but it is no longer kept: answers are deleted after the key's TTL and the keep (purged at %s). Use a new key to ask again.",
			op.ID, op.PurgedAt.UTC().Format(time.RFC3339))}
}
