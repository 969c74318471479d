// Package retain is the retention of Settle's history: closed operations whose closing is
// older than the retention are removed with every row hanging from them, a batch of
// operations per short transaction, and the monthly partitions of the append-only tables are
// kept ahead of time and dropped once emptied. Open operations (received, in progress,
// unknown, expired) are never removed, whatever their age, nor anything they need; the
// rollups that /reconcile and /insights read are never removed.
package retain

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// DefaultKeep is how long a closed operation is kept after its closing: over a year, so a
// year-on-year question about any operation still finds it.
const DefaultKeep = 400 * 24 * time.Hour

// MinKeep is the shortest retention accepted whatever the providers' key retention: a week
// outlives Stripe's webhook retries (three days), so an event for a removed operation can
// never arrive.
const MinKeep = 7 * 24 * time.Hour

// DefaultBatch is how many operations one transaction removes: a few thousand rows, a
// transaction of well under a second that holds no lock anyone waits for.
const DefaultBatch = 1000

// DefaultInterval is the time between two background passes.
const DefaultInterval = time.Hour

// MonthsAhead is how many months after the present month have partitions ready, so a write
// never lands in the default partition while Settle runs.
const MonthsAhead = 2

// ParseKeep reads a retention: "off" (keep everything, returned as 0), a number of days
// ("400d") or a Go duration ("9600h").
func ParseKeep(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*366 {
			return 0, fmt.Errorf("%q is not a number of days such as 400d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a duration such as 400d or 9600h, or off", s)
	}
	return d, nil
}

// Counts says how many rows of each kind a pass removed (or, dry, would remove).
type Counts struct {
	Operations     int64 `json:"operations"`
	ClientRequests int64 `json:"client_requests"`
	Attempts       int64 `json:"attempts"`
	Evidence       int64 `json:"evidence"`
	AuditRows      int64 `json:"audit_rows"`
	OutboxEvents   int64 `json:"outbox_events"`
	Jobs           int64 `json:"jobs"`
	Checkpoints    int64 `json:"job_checkpoints"`
	Charges        int64 `json:"provider_charges"`
	ProviderEvents int64 `json:"provider_events"`
	Exceptions     int64 `json:"recon_exceptions"`
	// ConsumedEvents are receivers' inbox rows of events applied before the cutoff.
	ConsumedEvents int64 `json:"consumed_events"`
	// FollowUps are people's follow-ups of the removed operations, and Notifications the
	// rows of the follow-ups' outbox that told them how those ended.
	FollowUps     int64 `json:"follow_ups"`
	Notifications int64 `json:"follow_up_notifications"`
	// Proposals are the removed operations' close proposals, whatever became of them.
	Proposals int64 `json:"close_proposals"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Operations += o.Operations
	c.ClientRequests += o.ClientRequests
	c.Attempts += o.Attempts
	c.Evidence += o.Evidence
	c.AuditRows += o.AuditRows
	c.OutboxEvents += o.OutboxEvents
	c.Jobs += o.Jobs
	c.Checkpoints += o.Checkpoints
	c.Charges += o.Charges
	c.ProviderEvents += o.ProviderEvents
	c.Exceptions += o.Exceptions
	c.ConsumedEvents += o.ConsumedEvents
	c.FollowUps += o.FollowUps
	c.Notifications += o.Notifications
	c.Proposals += o.Proposals
}

// Total is the number of rows c counts.
func (c Counts) Total() int64 {
	return c.Operations + c.ClientRequests + c.Attempts + c.Evidence + c.AuditRows + c.OutboxEvents +
		c.Jobs + c.Checkpoints + c.Charges + c.ProviderEvents + c.Exceptions + c.ConsumedEvents +
		c.FollowUps + c.Notifications + c.Proposals
}

// Report is what one pass did.
type Report struct {
	Cutoff time.Time `json:"cutoff"`
	DryRun bool      `json:"dry_run,omitempty"`
	// Due is how many operations were due for removal when the pass began.
	Due int64 `json:"due"`
	// Counts are the rows the pass removed; in a dry run, the rows it would remove with the
	// due operations.
	Counts
	// Orphans, in a dry run only, are the rows belonging to no operation that a pass would
	// remove (a pass counts those it removes in Counts).
	Orphans           Counts   `json:"orphans,omitzero"`
	PartitionsCreated int      `json:"partitions_created"`
	PartitionsDropped []string `json:"partitions_dropped,omitempty"`
	// Skipped says another replica, or the command, held the retention's role (or this pass
	// lost it).
	Skipped bool `json:"skipped,omitempty"`
}

// Summary is the report in one line, for the command and the log.
func (r Report) Summary() string {
	if r.Skipped {
		return "retention: another replica is running a pass; nothing done"
	}
	if r.DryRun {
		o := r.Orphans
		return fmt.Sprintf("retention (dry run): %d closed operations closed before %s would be removed with their rows (%s), and %d rows that belong to no operation (%d refused client requests, %d provider charges, %d reconciliation exceptions, %d audit rows, %d applied events)",
			r.Due, r.Cutoff.UTC().Format(time.RFC3339), r.Counts.rows(), o.Total(), o.ClientRequests, o.Charges, o.Exceptions, o.AuditRows, o.ConsumedEvents)
	}
	return fmt.Sprintf("retention: removed %d operations closed before %s (%s), %d partitions created, %d dropped",
		r.Operations, r.Cutoff.UTC().Format(time.RFC3339), r.Counts.rows(), r.PartitionsCreated, len(r.PartitionsDropped))
}

// rows names the rows hanging from operations that c counts, for the summary.
func (c Counts) rows() string {
	return fmt.Sprintf("%d client requests, %d attempts, %d evidence, %d audit rows, %d outbox events, %d jobs, %d charges, %d follow-ups, %d follow-up notifications, %d close proposals",
		c.ClientRequests, c.Attempts, c.Evidence, c.AuditRows, c.OutboxEvents, c.Jobs, c.Charges, c.FollowUps, c.Notifications, c.Proposals)
}

// BatchParams is one batch of a pass.
type BatchParams struct {
	Now    time.Time
	Cutoff time.Time
	Batch  int
	// Lease is the holding of the retention's role the pass is under: the store removes
	// nothing once it is no longer held. Zero for a pass without a role.
	Lease ops.Lease
}

// Store is what the retention needs from the database. Every method is its own short
// transaction; EnsurePartitions, RemoveBatch and DropEmptyPartitions do nothing once the
// lease they are given is no longer held (the latter two then report locked = false).
type Store interface {
	// EnsurePartitions creates the monthly partitions from now's month to months ahead; none
	// once l is no longer held.
	EnsurePartitions(ctx context.Context, l ops.Lease, now time.Time, ahead int) (int, error)
	// CountDue counts the operations a pass with p would remove.
	CountDue(ctx context.Context, p BatchParams) (int64, error)
	// CountRemoved counts the rows a whole pass with p would remove with the due
	// operations, the operations included.
	CountRemoved(ctx context.Context, p BatchParams) (Counts, error)
	// CountOrphans counts the rows belonging to no operation that a whole pass with p would
	// remove.
	CountOrphans(ctx context.Context, p BatchParams) (Counts, error)
	// RemoveBatch removes up to p.Batch due operations with all their rows, children first,
	// and up to a batch of the old rows that belong to no operation.
	RemoveBatch(ctx context.Context, p BatchParams) (b Batch, locked bool, err error)
	// DropEmptyPartitions drops the partitions wholly before cutoff that hold no row.
	DropEmptyPartitions(ctx context.Context, l ops.Lease, now, cutoff time.Time) (dropped []string, locked bool, err error)
	// RecordPass writes the pass's audit row (entity "retention").
	RecordPass(ctx context.Context, rep Report, now time.Time, actor string) error
}

// Batch is what one batch removed; More says another batch may find more.
type Batch struct {
	Counts
	More bool
}

// Progress is told how far a pass is: Start with the operations due, Add per batch.
type Progress interface {
	Start(total int, unit string)
	Add(n int)
	Done()
}

// Role is the name of the retention's role.
const Role = "retention"

// Retention is the background role and the command. Keep 0 is "off": partitions are still
// kept ahead, nothing is removed.
type Retention struct {
	Store    Store
	Clock    ops.Clock
	Keep     time.Duration
	Interval time.Duration
	Batch    int
	// Actor names this process in the audit row ("retention:<worker id>").
	Actor    string
	Progress Progress
	// Role, named Role, lets one replica, or the command, run a pass at a time. Without one
	// (a test, a one-off on a database no server uses) passes take no lease.
	Role   *ops.Role
	Logger *slog.Logger
}

// RunOnce does one pass: partitions ahead, then batches until none is due or ctx ends, then
// emptied partitions dropped and the audit row written, all under the role; a dry run only
// counts, and takes no lease. A pass cut short (a crash, ctx cancelled, the lease lost)
// leaves whole batches done and none half done; the next pass goes on.
func (r *Retention) RunOnce(ctx context.Context, dryRun bool) (Report, error) {
	if dryRun || r.Role == nil {
		return r.pass(ctx, dryRun, ops.Lease{})
	}
	var rep Report
	_, held, err := r.Role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		var err error
		rep, err = r.pass(ctx, false, l)
		return err
	})
	if !held && err == nil {
		rep = Report{Cutoff: r.Clock.Now().Add(-r.Keep), Skipped: true}
	}
	return rep, err
}

func (r *Retention) pass(ctx context.Context, dryRun bool, l ops.Lease) (Report, error) {
	now := r.Clock.Now()
	rep := Report{Cutoff: now.Add(-r.Keep), DryRun: dryRun}
	var err error
	if !dryRun {
		if rep.PartitionsCreated, err = r.Store.EnsurePartitions(ctx, l, now, MonthsAhead); err != nil {
			return rep, fmt.Errorf("retention: create partitions: %w", err)
		}
	}
	if r.Keep <= 0 {
		return rep, nil
	}
	p := BatchParams{Now: now, Cutoff: rep.Cutoff, Batch: r.batch(), Lease: l}
	if rep.Due, err = r.Store.CountDue(ctx, p); err != nil {
		return rep, fmt.Errorf("retention: count due operations: %w", err)
	}
	if dryRun {
		if rep.Counts, err = r.Store.CountRemoved(ctx, p); err != nil {
			return rep, fmt.Errorf("retention: count the rows of the due operations: %w", err)
		}
		if rep.Orphans, err = r.Store.CountOrphans(ctx, p); err != nil {
			return rep, fmt.Errorf("retention: count rows of no operation: %w", err)
		}
		return rep, nil
	}
	if err := r.removeAll(ctx, p, &rep); err != nil || rep.Skipped {
		return rep, err
	}
	dropped, locked, err := r.Store.DropEmptyPartitions(ctx, l, now, rep.Cutoff)
	if err != nil {
		return rep, fmt.Errorf("retention: drop emptied partitions: %w", err)
	}
	rep.PartitionsDropped, rep.Skipped = dropped, !locked
	if err := r.Store.RecordPass(ctx, rep, r.Clock.Now(), r.Actor); err != nil {
		return rep, fmt.Errorf("retention: record the pass: %w", err)
	}
	return rep, nil
}

// removeAll runs batches until one comes back short; ctx is checked between batches only,
// so a cancelled pass ends on a batch boundary.
func (r *Retention) removeAll(ctx context.Context, p BatchParams, rep *Report) error {
	progress := r.Progress
	if progress == nil {
		progress = noProgress{}
	}
	progress.Start(int(rep.Due), "operations")
	defer progress.Done()
	for ctx.Err() == nil {
		b, locked, err := r.Store.RemoveBatch(ctx, p)
		if err != nil {
			return fmt.Errorf("retention: remove a batch: %w", err)
		}
		if !locked {
			rep.Skipped = true
			return nil
		}
		rep.Add(b.Counts)
		progress.Add(int(b.Operations))
		if !b.More {
			return nil
		}
	}
	return ctx.Err()
}

// Loop is the retention's background loop: a pass at once (which also makes this month's
// and the next months' partitions ready), then one every Interval.
func (r *Retention) Loop() *ops.Loop {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	return ops.NewLoop(r.Logger, "retention", interval, func(ctx context.Context, log *slog.Logger) (bool, error) {
		rep, err := r.RunOnce(ctx, false)
		if err == nil && (rep.Operations > 0 || rep.PartitionsCreated > 0 || len(rep.PartitionsDropped) > 0) {
			log.Info(rep.Summary())
		}
		return false, err
	})
}

func (r *Retention) batch() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return DefaultBatch
}

type noProgress struct{}

func (noProgress) Start(int, string) {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}
