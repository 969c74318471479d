package chaos

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/refund"
)

// errDead is what a killed process gets from the database: nothing it does after its death
// reaches the ledger.
var errDead = errors.New("chaos: this process was killed")

// proc is one simulated Settle process's way to the database. Killing it is a crash: from
// that moment every read and write fails, so the process's goroutines run out without
// leaving a trace, its leases stay until they run out, and its attempt in flight stays
// unfinished, as after SIGKILL. Every method is written out (no embedding), so the compiler
// checks that no store method can slip past a dead process.
type proc struct {
	db   *pg.DB
	jobs *jobstore.Store
	dead atomic.Bool
}

var (
	_ ops.Store    = (*proc)(nil)
	_ jobs.Store   = (*proc)(nil)
	_ refund.Store = (*proc)(nil)
)

func newProc(db *pg.DB) *proc { return &proc{db: db, jobs: jobstore.New(db)} }

// kill crashes the process.
func (p *proc) kill() { p.dead.Store(true) }

func (p *proc) alive() error {
	if p.dead.Load() {
		return errDead
	}
	return nil
}

// Open implements ops.Store.
func (p *proc) Open(ctx context.Context, o ops.OpenParams) (ops.Opened, error) {
	if err := p.alive(); err != nil {
		return ops.Opened{}, err
	}
	return p.db.Open(ctx, o)
}

// Join implements ops.Store.
func (p *proc) Join(ctx context.Context, opID, requestRef string, now time.Time) (ops.Opened, error) {
	if err := p.alive(); err != nil {
		return ops.Opened{}, err
	}
	return p.db.Join(ctx, opID, requestRef, now)
}

// Get implements ops.Store.
func (p *proc) Get(ctx context.Context, id string) (*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.Get(ctx, id)
}

// Claim implements ops.Store.
func (p *proc) Claim(ctx context.Context, c ops.ClaimParams) (*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.Claim(ctx, c)
}

// BeginAttempt implements ops.Store.
func (p *proc) BeginAttempt(ctx context.Context, b ops.BeginParams) (*ops.Operation, *ops.Attempt, error) {
	if err := p.alive(); err != nil {
		return nil, nil, err
	}
	return p.db.BeginAttempt(ctx, b)
}

// Transition implements ops.Store.
func (p *proc) Transition(ctx context.Context, t ops.TransitionParams) (*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.Transition(ctx, t)
}

// SetPhase implements ops.Store.
func (p *proc) SetPhase(ctx context.Context, id, owner string, phase ops.Phase, leaseUntil, now time.Time) (*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.SetPhase(ctx, id, owner, phase, leaseUntil, now)
}

// AnswerClientRequest implements ops.Store.
func (p *proc) AnswerClientRequest(ctx context.Context, id int64, a ops.Answer, at time.Time) error {
	if err := p.alive(); err != nil {
		return err
	}
	return p.db.AnswerClientRequest(ctx, id, a, at)
}

// RefuseClientRequest implements ops.Store.
func (p *proc) RefuseClientRequest(ctx context.Context, id int64, reason string, at time.Time) error {
	if err := p.alive(); err != nil {
		return err
	}
	return p.db.RefuseClientRequest(ctx, id, reason, at)
}

// ClaimStalled implements ops.Store.
func (p *proc) ClaimStalled(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.ClaimStalled(ctx, owner, now, leaseUntil, limit)
}

// ExpireDue implements ops.Store.
func (p *proc) ExpireDue(ctx context.Context, actor string, now time.Time, limit int) (int, error) {
	if err := p.alive(); err != nil {
		return 0, err
	}
	return p.db.ExpireDue(ctx, actor, now, limit)
}

// Attempts implements ops.Store.
func (p *proc) Attempts(ctx context.Context, opID string) ([]ops.Attempt, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.Attempts(ctx, opID)
}

// LatestForIntent implements ops.Store and jobs.Store.
func (p *proc) LatestForIntent(ctx context.Context, tenantID int64, kind ops.Kind, intentKey string) (*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.LatestForIntent(ctx, tenantID, kind, intentKey)
}

// RecordRequest implements ops.Store.
func (p *proc) RecordRequest(ctx context.Context, r ops.RequestParams, at time.Time) (int64, error) {
	if err := p.alive(); err != nil {
		return 0, err
	}
	return p.db.RecordRequest(ctx, r, at)
}

// OpenForPayment implements refund.Store.
func (p *proc) OpenForPayment(ctx context.Context, tenantID int64, paymentRef string) ([]*ops.Operation, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.OpenForPayment(ctx, tenantID, paymentRef)
}

// LastAttemptError implements refund.Store.
func (p *proc) LastAttemptError(ctx context.Context, opID string) (string, error) {
	if err := p.alive(); err != nil {
		return "", err
	}
	return p.db.LastAttemptError(ctx, opID)
}

// MadeCharges implements refund.Store.
func (p *proc) MadeCharges(ctx context.Context, opID string) ([]ops.ProviderRecord, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.db.MadeCharges(ctx, opID)
}

// InsertJob implements jobs.Store.
func (p *proc) InsertJob(ctx context.Context, j *jobs.Job, up jobs.Checkpoint) (*jobs.Job, bool, error) {
	if err := p.alive(); err != nil {
		return nil, false, err
	}
	return p.jobs.InsertJob(ctx, j, up)
}

// RepeatJob implements jobs.Store.
func (p *proc) RepeatJob(ctx context.Context, tenantID int64, key, fingerprint string) (*jobs.Job, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.RepeatJob(ctx, tenantID, key, fingerprint)
}

// GetJob implements jobs.Store.
func (p *proc) GetJob(ctx context.Context, tenantID int64, id string) (*jobs.Job, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.GetJob(ctx, tenantID, id)
}

// ClaimJobs implements jobs.Store.
func (p *proc) ClaimJobs(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*jobs.Job, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.ClaimJobs(ctx, owner, now, leaseUntil, limit)
}

// ClaimJob implements jobs.Store.
func (p *proc) ClaimJob(ctx context.Context, id, owner string, now, leaseUntil time.Time) (*jobs.Job, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.ClaimJob(ctx, id, owner, now, leaseUntil)
}

// ExtendJob implements jobs.Store.
func (p *proc) ExtendJob(ctx context.Context, id, owner string, now, until time.Time) error {
	if err := p.alive(); err != nil {
		return err
	}
	return p.jobs.ExtendJob(ctx, id, owner, now, until)
}

// RequeueStranded implements jobs.Store.
func (p *proc) RequeueStranded(ctx context.Context, now time.Time) (int, error) {
	if err := p.alive(); err != nil {
		return 0, err
	}
	return p.jobs.RequeueStranded(ctx, now)
}

// ChangeJob implements jobs.Store.
func (p *proc) ChangeJob(ctx context.Context, c jobs.JobChange) (*jobs.Job, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.ChangeJob(ctx, c)
}

// SaveCheckpoint implements jobs.Store.
func (p *proc) SaveCheckpoint(ctx context.Context, c jobs.Checkpoint) error {
	if err := p.alive(); err != nil {
		return err
	}
	return p.jobs.SaveCheckpoint(ctx, c)
}

// FindCheckpoint implements jobs.Store.
func (p *proc) FindCheckpoint(ctx context.Context, dedupKey string, stage jobs.Stage, inputHash, codeVersion string) (*jobs.Checkpoint, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.FindCheckpoint(ctx, dedupKey, stage, inputHash, codeVersion)
}

// Checkpoints implements jobs.Store.
func (p *proc) Checkpoints(ctx context.Context, j *jobs.Job) ([]jobs.Checkpoint, error) {
	if err := p.alive(); err != nil {
		return nil, err
	}
	return p.jobs.Checkpoints(ctx, j)
}

// PublishJob implements jobs.Store.
func (p *proc) PublishJob(ctx context.Context, pp jobs.PublishParams) (*jobs.Job, bool, error) {
	if err := p.alive(); err != nil {
		return nil, false, err
	}
	return p.jobs.PublishJob(ctx, pp)
}
