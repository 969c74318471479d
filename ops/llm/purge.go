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
	// Lease is the holding of the purge's role the pass is under: nothing is purged once it
	// is no longer held. Zero for a pass without a role.
	Lease ops.Lease
}

// PurgeReport says what one pass purged.
type PurgeReport struct {
	// Skipped: another replica holds the purge's role, or this pass lost it.
	Skipped    bool
	Operations int
	Jobs       int
}

// PurgeStore deletes the bodies that are due.
type PurgeStore interface {
	// PurgeBodies purges, in transactions of at most p.Batch rows, each while p.Lease is
	// held, the request and result (and the events of the stream that delivered it) of every
	// finished llm_call and llm_job operation created more than its retention plus p.Keep
	// before p.Now, and the document and results of every published or failed job created
	// more than p.JobTTL plus p.Keep before it, stamping each row's purged_at.
	PurgeBodies(ctx context.Context, p PurgeParams) (PurgeReport, error)
}

// PurgeRole is the name of the body purge's role.
const PurgeRole = "body purge"

// Purger is the background role that keeps prompts and completions no longer than the
// key's TTL plus Keep. Every replica may run it; its Role lets one act at a time.
type Purger struct {
	Store    PurgeStore
	Clock    ops.Clock
	Keep     time.Duration
	JobTTL   time.Duration
	Interval time.Duration
	Batch    int
	// Role, named PurgeRole, lets one replica purge at a time. Without one (a test, a
	// one-off on a database no server uses) passes take no lease.
	Role   *ops.Role
	Logger *slog.Logger
}

// Loop is the purge's background loop: a pass every Interval (default 10 minutes).
func (p *Purger) Loop() *ops.Loop {
	interval := p.Interval
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	return ops.NewLoop(p.Logger, "body purge", interval, func(ctx context.Context, log *slog.Logger) (bool, error) {
		rep, err := p.RunOnce(ctx)
		if err == nil && rep.Operations+rep.Jobs > 0 {
			log.Info("purged bodies", "operations", rep.Operations, "jobs", rep.Jobs)
		}
		return false, err
	})
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
	params := PurgeParams{Now: p.Clock.Now(), Keep: keep, JobTTL: p.JobTTL, Batch: batch}
	var rep PurgeReport
	var err error
	if p.Role == nil {
		rep, err = p.Store.PurgeBodies(ctx, params)
	} else {
		var held bool
		_, held, err = p.Role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
			params.Lease = l
			var err error
			rep, err = p.Store.PurgeBodies(ctx, params)
			return err
		})
		rep.Skipped = rep.Skipped || !held
	}
	if err != nil {
		return rep, fmt.Errorf("purge bodies: %w", err)
	}
	return rep, nil
}

// purgedError answers a replay of op, whose answer the purge deleted: a 4xx problem of its
// own, not an internal error, since the answer was produced and billed once.
func purgedError(op *ops.Operation) error {
	return &ops.Error{Code: ops.ENOTFOUND, Reason: ReasonAnswerPurged,
		Message: fmt.Sprintf("The answer of operation %s was produced, but it is no longer kept: answers are deleted after the key's TTL and the keep (purged at %s). Use a new key to ask again.",
			op.ID, op.PurgedAt.UTC().Format(time.RFC3339))}
}
