package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settle-dev/settle/ops"
)

// The states of a bulk lookup.
const (
	BulkRunning = "running"
	BulkStopped = "stopped"
	BulkDone    = "done"
)

// MaxBulkSamples bounds how many of a bulk lookup's operations that need a person are kept
// with their reason, so a run over a million rows keeps a small row.
const MaxBulkSamples = 50

// BulkLookup is "look up everything matching" run over a whole queue filter as background
// work: it survives the page that started it and the replica that runs it, and everyone
// sees it while it runs.
type BulkLookup struct {
	ID int64
	// Filter is the queue filter as it was when the run started; its Now is fixed then, so an
	// age filter means the same rows however long the run takes.
	Filter QueueFilter
	// FilterLabel is the filter in words, for the page and the audit log.
	FilterLabel string
	Actor       string
	State       string
	StartedAt   time.Time
	FinishedAt  *time.Time
	StoppedBy   string
	// Total is how many operations matched when the run started.
	Total, Done, Closed, AlreadyClosed, NeedPerson int
	// Reasons counts the operations left for a person by lookup outcome.
	Reasons map[string]int
	// Samples are the first operations left for a person, with the reason in words.
	Samples []BulkSample
	// Cursor is where the run stands in the queue: the last operation looked up.
	Cursor     *QueueCursor
	LeaseOwner string
	LeaseUntil *time.Time
}

// BulkSample is one operation a bulk lookup left for a person.
type BulkSample struct {
	ID      string `json:"id"`
	Order   string `json:"order,omitempty"`
	Outcome string `json:"outcome"`
	Message string `json:"message"`
}

// BulkStore keeps bulk lookups. Progress is written only by the holder of the run's lease,
// so two replicas never run one filter at once; a run whose holder died is claimed again
// once its lease has ended and resumes from its cursor.
type BulkStore interface {
	// StartBulk records a running bulk lookup and counts the operations its filter matches.
	StartBulk(ctx context.Context, b BulkLookup) (BulkLookup, error)
	// ClaimBulk leases the oldest running bulk lookup nobody holds; nil when there is none.
	ClaimBulk(ctx context.Context, owner string, now, until time.Time) (*BulkLookup, error)
	// SaveBulkProgress stores the counts, samples and cursor of b and renews its lease, or
	// finishes it when finished is set. It reports the run's state, and ErrBulkLeaseLost when
	// owner no longer holds it.
	SaveBulkProgress(ctx context.Context, b BulkLookup, owner string, now, until time.Time, finished bool) (string, error)
	// StopBulk stops a running bulk lookup; the operations already looked up stay as they are.
	StopBulk(ctx context.Context, id int64, actor string, now time.Time) (BulkLookup, error)
	GetBulk(ctx context.Context, id int64) (BulkLookup, error)
	// RunningBulks lists the bulk lookups under way, oldest first.
	RunningBulks(ctx context.Context) ([]BulkLookup, error)
}

// ErrBulkLeaseLost is returned to a runner whose lease on a bulk lookup was taken over.
var ErrBulkLeaseLost = errors.New("bulk lookup lease lost")

// StartBulkLookup starts looking up every operation f matches, in the background, and
// records it in the audit log as one action with its filter.
func (d *Desk) StartBulkLookup(ctx context.Context, f QueueFilter, label, actor string) (BulkLookup, error) {
	if d.Bulk == nil {
		return BulkLookup{}, ops.Errorf(ops.EUNAVAILABLE, "Bulk lookups are not configured on this server.")
	}
	now := d.Ledger.Clock.Now()
	f.Now, f.After, f.Limit = now, nil, 0
	if f.Status == "" {
		f.Status = ops.StatusUnknown
	}
	b, err := d.Bulk.StartBulk(ctx, BulkLookup{Filter: f, FilterLabel: label, Actor: actor, State: BulkRunning, StartedAt: now})
	if err != nil {
		return BulkLookup{}, err
	}
	return b, d.auditBulk(ctx, b, "bulk_lookup.start", actor, "")
}

// StopBulkLookup stops a running bulk lookup; anyone who may look up may stop it.
func (d *Desk) StopBulkLookup(ctx context.Context, id int64, actor string) (BulkLookup, error) {
	if d.Bulk == nil {
		return BulkLookup{}, ops.Errorf(ops.EUNAVAILABLE, "Bulk lookups are not configured on this server.")
	}
	b, err := d.Bulk.StopBulk(ctx, id, actor, d.Ledger.Clock.Now())
	if err != nil {
		return BulkLookup{}, err
	}
	return b, d.auditBulk(ctx, b, "bulk_lookup.stop", actor, fmt.Sprintf("stopped after %d of %d", b.Done, b.Total))
}

// BulkLookup reads one bulk lookup.
func (d *Desk) BulkLookup(ctx context.Context, id int64) (BulkLookup, error) {
	if d.Bulk == nil {
		return BulkLookup{}, ops.Errorf(ops.ENOTFOUND, "There is no bulk lookup %d.", id)
	}
	return d.Bulk.GetBulk(ctx, id)
}

// RunningBulkLookups lists the bulk lookups under way, for everyone to see.
func (d *Desk) RunningBulkLookups(ctx context.Context) ([]BulkLookup, error) {
	if d.Bulk == nil {
		return nil, nil
	}
	return d.Bulk.RunningBulks(ctx)
}

func (d *Desk) auditBulk(ctx context.Context, b BulkLookup, action, actor, reason string) error {
	if d.Audit == nil {
		return nil
	}
	after, err := json.Marshal(map[string]any{"filter": b.FilterLabel, "state": b.State, "total": b.Total, "done": b.Done,
		"closed": b.Closed, "already_closed": b.AlreadyClosed, "need_person": b.NeedPerson, "reasons": b.Reasons})
	if err != nil {
		return fmt.Errorf("audit bulk lookup: %w", err)
	}
	return d.Audit.RecordAudit(ctx, AuditLogEntry{At: d.Ledger.Clock.Now(), Actor: actor, Action: action,
		Entity: "bulk_lookup", EntityID: fmt.Sprint(b.ID), After: after, Reason: reason})
}

// BulkRunner runs the bulk lookups started from the dashboard, a page of operations at a
// time, on whichever replica holds a run's lease.
type BulkRunner struct {
	Desk   *Desk
	Queues Queues
	Owner  string
	// Lease is how long a run stays with a runner that stopped renewing it (default 2 min):
	// longer than one page of lookups takes.
	Lease time.Duration
	// PageSize is how many operations are looked up between two saves (default 20).
	PageSize int
	// Interval is how often an idle runner looks for work (default 1 s).
	Interval time.Duration
	Logger   *slog.Logger
}

// Loop is the runner's background loop: it works on one bulk lookup after the other, and
// looks again every Interval when none is running. Every replica may run one: each bulk
// lookup is claimed in its own row.
func (r *BulkRunner) Loop() *ops.Loop {
	return ops.NewLoop(r.Logger, "bulk lookups", r.interval(), func(ctx context.Context, _ *slog.Logger) (bool, error) {
		return r.RunOnce(ctx)
	})
}

// RunOnce claims one running bulk lookup and works on it until it is done, stopped, its
// lease is lost or ctx ends. It reports whether it found one.
func (r *BulkRunner) RunOnce(ctx context.Context) (bool, error) {
	clock := r.Desk.Ledger.Clock
	b, err := r.Desk.Bulk.ClaimBulk(ctx, r.Owner, clock.Now(), clock.Now().Add(r.lease()))
	if err != nil || b == nil {
		return false, err
	}
	for ctx.Err() == nil {
		finished, err := r.page(ctx, b)
		if err != nil {
			return true, err
		}
		now := clock.Now()
		state, err := r.Desk.Bulk.SaveBulkProgress(ctx, *b, r.Owner, now, now.Add(r.lease()), finished)
		if errors.Is(err, ErrBulkLeaseLost) {
			return true, nil
		}
		if err != nil {
			return true, err
		}
		if finished {
			b.State = BulkDone
			return true, r.Desk.auditBulk(ctx, *b, "bulk_lookup.done", b.Actor, "")
		}
		if state != BulkRunning {
			return true, nil
		}
	}
	return true, ctx.Err()
}

// page looks up the next page of b's filter and adds what came of it to b; finished says the
// filter has no rows left that existed when the run started.
func (r *BulkRunner) page(ctx context.Context, b *BulkLookup) (finished bool, err error) {
	f := b.Filter
	f.After, f.Limit = b.Cursor, r.pageSize()
	page, err := r.Queues.ListQueue(ctx, f, f.Now)
	if err != nil {
		return false, err
	}
	var ids []string
	for _, o := range page.Ops {
		// Rows created after the start were not counted in Total and are not the run's.
		if o.CreatedAt.After(b.StartedAt) {
			page.Next = nil
			break
		}
		ids = append(ids, o.ID)
		b.Cursor = &QueueCursor{CreatedAt: o.CreatedAt, ID: o.ID}
	}
	if len(ids) > 0 {
		b.add(r.Desk.LookupMany(ctx, ids, fmt.Sprintf("%s (bulk lookup %d)", b.Actor, b.ID)))
	}
	return page.Next == nil, nil
}

// add counts one page's outcomes into the run.
func (b *BulkLookup) add(out BulkOutcome) {
	if b.Reasons == nil {
		b.Reasons = map[string]int{}
	}
	b.Done += len(out.Results)
	b.Closed += out.Closed
	b.AlreadyClosed += out.AlreadyClosed
	b.NeedPerson += out.NeedPerson
	for k, n := range out.Reasons {
		b.Reasons[k] += n
	}
	for _, res := range out.Results {
		if !res.NeedsPerson() || len(b.Samples) >= MaxBulkSamples {
			continue
		}
		s := BulkSample{ID: res.OperationID, Outcome: res.Outcome, Message: res.Message}
		if res.Op != nil {
			s.Order = res.Op.OrderRef
		}
		b.Samples = append(b.Samples, s)
	}
}

func (r *BulkRunner) lease() time.Duration {
	if r.Lease > 0 {
		return r.Lease
	}
	return 2 * time.Minute
}

func (r *BulkRunner) pageSize() int {
	if r.PageSize > 0 {
		return r.PageSize
	}
	return 20
}

func (r *BulkRunner) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return time.Second
}
