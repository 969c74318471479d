// Package opstest builds operations in the states tests and the demo start from: an
// operation whose caller went away in the middle of its sends, one another process took
// over, one nobody knows the outcome of. Flows never take these steps one at a time (they
// admit, run, answer and close through the Ledger), so the Ledger keeps them to itself;
// a Seeder takes them through the same store calls and the same checks the Ledger makes,
// so what it builds is a state the Ledger itself can reach.
package opstest

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Seeder takes single steps of an operation's life on the store a Ledger uses, with the
// Ledger's clock and limits.
type Seeder struct {
	store  ops.Store
	clock  ops.Clock
	limits ops.Limits
}

// New returns a Seeder for the operations of l, whose store is store.
func New(l *ops.Ledger, store ops.Store) *Seeder {
	return &Seeder{store: store, clock: l.Clock, limits: l.Limits}
}

// Claim leases op to owner as a process taking it over would: only when nobody holds it
// (received, released, or stalled).
func (s *Seeder) Claim(ctx context.Context, op *ops.Operation, owner string) (*ops.Operation, error) {
	now := s.clock.Now()
	switch {
	case op.Status == ops.StatusReceived, op.Stalled(now), op.Status == ops.StatusInProgress && op.LeaseUntil == nil:
	default:
		return nil, ops.Errorf(ops.ECONFLICT, "Operation %s is %s and cannot be claimed.", op.ID, op.Status)
	}
	return s.store.Claim(ctx, ops.ClaimParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now, LeaseUntil: now.Add(s.limits.Lease)})
}

// BeginAttempt records a new attempt of op by owner, its lease holder, as one about to be
// sent; the send checks of the Ledger apply (ops rule 1: the attempt carries the
// operation's provider key).
func (s *Seeder) BeginAttempt(ctx context.Context, op *ops.Operation, owner string) (*ops.Operation, *ops.Attempt, error) {
	now := s.clock.Now()
	if err := ops.CheckSend(op, owner, now, s.limits); err != nil {
		return nil, nil, err
	}
	var until *time.Time
	if op.RetryUntil == nil && op.Retention > 0 {
		t := now.Add(op.Retention - s.limits.RetentionMargin)
		until = &t
	}
	return s.store.BeginAttempt(ctx, ops.BeginParams{ID: op.ID, Version: op.Version, Owner: owner, Now: now,
		MaxAttempts: s.limits.AttemptsPerOperation, RetryUntil: until})
}

// Release ends owner's lease on op, in progress still, as a caller whose budget is spent
// does: the next request or the reaper may take it over at once.
func (s *Seeder) Release(ctx context.Context, op *ops.Operation, owner string) (*ops.Operation, error) {
	return s.transition(ctx, ops.TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: ops.StatusInProgress,
		Now: s.clock.Now(), Actor: owner, Owner: owner, Action: "release", AnswerSince: op.CreatedAt})
}

// MarkUnknown makes op unknown, as the reaper or a policy that forbids a resend does once
// nobody can tell what the provider did: nothing more is sent for it.
func (s *Seeder) MarkUnknown(ctx context.Context, op *ops.Operation, actor, reason string) (*ops.Operation, error) {
	return s.transition(ctx, ops.TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: ops.StatusUnknown,
		Now: s.clock.Now(), Actor: actor, Action: "mark_unknown", Reason: reason})
}

func (s *Seeder) transition(ctx context.Context, p ops.TransitionParams) (*ops.Operation, error) {
	if err := ops.CheckTransition(p.From, p.To); err != nil {
		return nil, err
	}
	return s.store.Transition(ctx, p)
}
