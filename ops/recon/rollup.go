package recon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/settle-dev/settle/ops"
)

// RollupState is how far the rollup job has got.
type RollupState struct {
	// MinutesUntil: every minute before it has been computed at least once. Zero when the
	// job never ran.
	MinutesUntil time.Time
	// ChangesUntil: changes to older rows (an operation closed, a charge recorded late)
	// recorded before it are in the rollups.
	ChangesUntil time.Time
	LastRunAt    time.Time
	// MinutesFrom is the first minute whose minute rows are kept; zero when none was pruned.
	MinutesFrom time.Time
}

// Ran reports whether the job ever ran.
func (s RollupState) Ran() bool { return !s.MinutesUntil.IsZero() }

// RollupParams is what one run of the rollup job does.
type RollupParams struct {
	Now time.Time
	// Overlap is how far before the last run's end this run starts again, for minutes and for
	// changes: rows committed after the last run but stamped before its end (a slow commit,
	// another replica's clock) are counted. It must be at least how late after its stamp a
	// row may commit (DefaultRollupOverlap says why a minute is); a row answered long after
	// its minute is found by its operation's audited change, not by the overlap.
	Overlap time.Duration
	// MaxSpan bounds the minutes one run computes for the first time, so catching up with a
	// large history takes many short transactions rather than one long one.
	MaxSpan time.Duration
	// MinuteKeep is how long minute rows (rollups and backlog snapshots) are kept; quarter
	// hours, hours and hourly snapshots are kept for good. 0 keeps everything.
	MinuteKeep time.Duration
	// Lease is the holding of the job's role the run is under: the store runs it only while
	// the lease is held. Zero for a job without a role.
	Lease ops.Lease
}

// RollupReport says what one run of the rollup job did.
type RollupReport struct {
	// Skipped: another replica holds the job's role, or this one lost it; nothing was done.
	Skipped bool
	// From and To are the contiguous range of minutes recomputed (To exclusive).
	From, To time.Time
	// Changed counts minutes before From recomputed because rows of theirs changed.
	Changed int
	// Minutes counts every minute recomputed; Rows the minute rows written.
	Minutes int
	Rows    int
	// Snapshot counts the backlog rows recorded; none while catching up.
	Snapshot int
	// Pruned counts the minute rows deleted as older than MinuteKeep.
	Pruned int
	// CaughtUp: the run reached Now. Otherwise another run should follow at once.
	CaughtUp bool
}

// RollupStore computes and stores the rollups.
type RollupStore interface {
	// RunRollups recomputes, while p.Lease is held (skipping otherwise), every minute
	// from the last run's end (less the overlap) up to Now or MaxSpan further, every older
	// minute whose rows changed since the last run, the quarter hours and hours holding
	// them, and, once caught up, a snapshot of the unknown and expired backlog; then it
	// deletes the minute rows older than MinuteKeep.
	RunRollups(ctx context.Context, p RollupParams) (RollupReport, error)
	RollupStatus(ctx context.Context) (RollupState, error)
}

// The rollup job's defaults.
const (
	DefaultRollupInterval = 15 * time.Second
	// DefaultRollupOverlap is how far before the last pass's end a pass starts again, for
	// the minutes it recomputes and for the changes it looks for. A pass is exact when no
	// row it counts, and no change that makes it recount an older minute, commits later
	// than this after its stamp. Each is stamped with its writer's clock just before the
	// one statement that writes it: an opening, an attempt's start, a transition with its
	// audit row or audited finish, a client request's answer, a charge that a webhook, a
	// lookup or the reconciler records, a finding. The ledger's statements go through the
	// group commit, whose batch has a 30 s deadline (RollupCommitBound), and API requests
	// are shed once its queue has waited a quarter of a second (the default write
	// backlog); the others are single statements of their own. Writer and job may each be
	// off the database's clock by ops.SkewLimit, 3 s at the default leases: 30 s and twice
	// that fit in the minute, the rest is margin for a wait for a connection
	// (RollupOverlapFor lengthens it for longer leases). What is answered or changed later
	// than that after its minute is not the overlap's: a status change is audited when it
	// happens, and the store recomputes from that audit the minutes of the operation's
	// creation, requests and attempts (a ten-minute call's close included); a repeat that
	// waited for its operation is answered after the change it waited for (the close, or
	// a takeover whose attempt is audited later); a charge or a double charge found late
	// is found by when it was seen. At a steady rate a pass then reads the rows of 75 s
	// and the part of a minute before them, 105 s on average: seven intervals' worth,
	// where five minutes read 345 s, 23 intervals' worth.
	DefaultRollupOverlap = time.Minute
	// RollupCommitBound is how long after its stamp a write of the ledger may commit, as
	// DefaultRollupOverlap counts it: the group commit's deadline for one batch.
	RollupCommitBound    = 30 * time.Second
	DefaultRollupMaxSpan = 6 * time.Hour
	// DefaultRollupMinuteKeep keeps minute rows five weeks: the pages read minutes only
	// for the last day, and a month of minutes is still there to look into an incident.
	DefaultRollupMinuteKeep = 35 * 24 * time.Hour
	// MinRollupMinuteKeep is the shortest keep: the insights page reads minute snapshots
	// for its last 24 hours.
	MinRollupMinuteKeep = 48 * time.Hour
)

// RollupOverlapFor is the overlap for replicas whose clocks may each be up to skew off the
// database's (ops.SkewLimit of their leases): DefaultRollupOverlap, or, when a writer's and
// the job's clocks may together be further apart than the half minute it leaves them,
// RollupCommitBound and twice skew, rounded up to the second.
func RollupOverlapFor(skew time.Duration) time.Duration {
	return max(DefaultRollupOverlap, (RollupCommitBound + 2*skew + time.Second - 1).Truncate(time.Second))
}

// RollupRole is the name of the rollup job's role.
const RollupRole = "rollups"

// Rollups is the background service that keeps the per-minute rollups exact: each pass
// recomputes whole minutes from the raw rows and replaces them, so a late row is counted by
// the next pass and a repeated pass changes nothing.
type Rollups struct {
	Store    RollupStore
	Clock    ops.Clock
	Interval time.Duration
	// Overlap is RollupParams.Overlap; 0 means DefaultRollupOverlap. A server whose leases
	// allow a wider skew sets RollupOverlapFor its limit.
	Overlap time.Duration
	MaxSpan time.Duration
	// MinuteKeep is RollupParams.MinuteKeep; 0 means DefaultRollupMinuteKeep, a negative
	// value keeps every minute.
	MinuteKeep time.Duration
	// Role, named RollupRole, lets one replica run the job at a time. Without one (a test, a
	// one-off on a database no server uses) passes take no lease.
	Role   *ops.Role
	Logger *slog.Logger
}

// Loop is the job's background loop: a pass every Interval; while a pass has not caught up
// with the present (the first run over a large history) the next one follows at once.
func (r *Rollups) Loop() *ops.Loop {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultRollupInterval
	}
	return ops.NewLoop(r.Logger, "rollups", interval, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		rep, err := r.RunOnce(ctx)
		return err == nil && !rep.CaughtUp && !rep.Skipped, err
	})
}

// RunOnce does one pass and reports what it did.
func (r *Rollups) RunOnce(ctx context.Context) (RollupReport, error) {
	p := RollupParams{Now: r.Clock.Now().UTC(), Overlap: r.Overlap, MaxSpan: r.MaxSpan, MinuteKeep: max(r.MinuteKeep, 0)}
	if r.MinuteKeep == 0 {
		p.MinuteKeep = DefaultRollupMinuteKeep
	}
	if p.Overlap <= 0 {
		p.Overlap = DefaultRollupOverlap
	}
	if p.MaxSpan <= 0 {
		p.MaxSpan = DefaultRollupMaxSpan
	}
	if r.Role == nil {
		rep, err := r.Store.RunRollups(ctx, p)
		if err != nil {
			return rep, fmt.Errorf("roll up: %w", err)
		}
		return rep, nil
	}
	var rep RollupReport
	_, held, err := r.Role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		p.Lease = l
		var err error
		rep, err = r.Store.RunRollups(ctx, p)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("roll up: %w", err)
	}
	rep.Skipped = rep.Skipped || !held
	return rep, nil
}

// CatchUp runs passes until one reaches the present: what a test or a benchmark calls
// after loading rows, and what the first run over a large history amounts to.
func (r *Rollups) CatchUp(ctx context.Context) (RollupReport, error) {
	for {
		rep, err := r.RunOnce(ctx)
		if err != nil || rep.CaughtUp || rep.Skipped {
			return rep, err
		}
	}
}

// MinuteRuns merges minutes (each the start of [m, m+1min)) into as few windows as possible,
// joining two when the gap between them is at most gap: recomputing a minute that did not
// change is harmless, and one query per window beats one per minute.
func MinuteRuns(minutes []time.Time, gap time.Duration) []Window {
	ms := make([]time.Time, 0, len(minutes))
	for _, m := range minutes {
		ms = append(ms, m.UTC().Truncate(time.Minute))
	}
	slices.SortFunc(ms, func(a, b time.Time) int { return a.Compare(b) })
	var out []Window
	for _, m := range ms {
		if n := len(out); n > 0 && !m.After(out[n-1].To.Add(gap)) {
			if end := m.Add(time.Minute); end.After(out[n-1].To) {
				out[n-1].To = end
			}
			continue
		}
		out = append(out, Window{From: m, To: m.Add(time.Minute)})
	}
	return out
}

// BacklogFilter chooses the backlog series of the insights page.
type BacklogFilter struct {
	Window
	// Bucket is the width of one point; each point is the last snapshot taken in it.
	Bucket   time.Duration
	TenantID int64
	Kind     ops.Kind
	Provider string
}

// BacklogPoint is the unknown and expired backlog as the last snapshot in one bucket saw it.
type BacklogPoint struct {
	Bucket  time.Time
	TakenAt time.Time
	Unknown int64
	Expired int64
	// OldestUnknown and OldestExpired are when the oldest such operation was created; zero
	// when there was none.
	OldestUnknown time.Time
	OldestExpired time.Time
}

// BacklogStore reads the backlog snapshots.
type BacklogStore interface {
	BacklogSeries(ctx context.Context, f BacklogFilter) ([]BacklogPoint, error)
}
