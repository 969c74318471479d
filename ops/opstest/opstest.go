// Package opstest builds operations in the states tests and the demo start from: an
// operation whose caller went away in the middle of its sends, one another process took
// over, one nobody knows the outcome of. Flows never take these steps one at a time (they
// admit, run, answer and close through the Ledger), so the Ledger keeps them to itself.
// A Seeder opens and finishes attempts through the Ledger's own protocol (Admit, and Run
// with a sender that answers what the test asks for), and takes the other steps through the
// same store calls and the same checks the Ledger makes, so what it builds is a state the
// Ledger itself can reach, with the same rows.
package opstest

import (
	"context"
	"errors"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Seeder takes single steps of an operation's life on the store a Ledger uses, with the
// Ledger's clock and limits.
type Seeder struct {
	ledger *ops.Ledger
	store  ops.Store
	clock  ops.Clock
	limits ops.Limits
}

// New returns a Seeder for the operations of l, whose store is store.
func New(l *ops.Ledger, store ops.Store) *Seeder {
	return &Seeder{ledger: l, store: store, clock: l.Clock, limits: l.Limits}
}

// Open opens a new operation for in as a client request recorded under requestRef: leased
// to owner with its first attempt begun, so that Finish may end it at once, or received and
// unleased when owner is empty. It admits the request as every flow does, so the operation,
// its client request and its audit row are the ones Admit writes; an intent that already has
// an operation Admit would answer from is refused with ECONFLICT, since nothing new was
// seeded.
func (s *Seeder) Open(ctx context.Context, in ops.Intent, requestRef, owner string) (ops.Admission, error) {
	in.RequestRef, in.Owner = requestRef, owner
	adm, err := s.ledger.Admit(ctx, in)
	if err != nil {
		return adm, err
	}
	if !adm.Created {
		return adm, ops.Errorf(ops.ECONFLICT, "The intent %q is answered by operation %s (%s): nothing new was opened.", in.IntentKey, adm.Op.ID, adm.Verdict)
	}
	return adm, nil
}

// errSeeded ends the run Finish starts once its one attempt is recorded.
var errSeeded = errors.New("opstest: the attempt is recorded")

// Finish ends attempt a of op, begun and leased to owner, as if its send had come back with
// res, and returns op as the rules then leave it. The attempt goes through Run with a sender
// that answers res, and the run stops as soon as the attempt's end is recorded: the attempt,
// the move of op, its audit row, its evidence and its outbox event are the ones a send that
// came back so writes, and an operation still in progress stays leased to owner for its next
// attempt (BeginAttempt), as between two attempts of one run. For a provider that takes no
// key, res.PossibleDuplicate says whether the send followed an uncertain one.
func (s *Seeder) Finish(ctx context.Context, op *ops.Operation, a *ops.Attempt, owner string, res ops.AttemptResult) (*ops.Operation, error) {
	if a == nil {
		return nil, ops.Errorf(ops.EINVALID, "There is no attempt of operation %s to finish.", op.ID)
	}
	answer := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult { return res })
	out, err := s.ledger.Run(ctx, op, answer, ops.RunSpec{Owner: owner, First: a, PossibleDuplicate: res.PossibleDuplicate,
		Hooks: ops.Hooks{AfterAttempt: func(context.Context, *ops.Operation, ops.AttemptResult) error { return errSeeded }}})
	if errors.Is(err, errSeeded) {
		return out, nil
	}
	if err == nil {
		// Run ends without the hook only when it records nothing.
		err = ops.Errorf(ops.EINVALID, "The attempt of operation %s was not recorded.", op.ID)
	}
	return nil, err
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
