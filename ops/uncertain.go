package ops

import (
	"context"
	"fmt"
)

// Whether an operation "may have run already" is asked of all its attempts, never of the
// last one alone. A provider that takes no idempotency key may have executed (and billed)
// an attempt whose answer was lost; a later attempt refused at the door (a 429, a send that
// never left) says nothing of what that earlier one did. A resend, by this run, by a client's
// retry or by whoever takes a dead worker's operation over, is then looked up first where
// the flow can look it up, and counted as a possible duplicate either way (rules 3 and 8).
// Only the provider's own answer for the operation settles it, and that closes the
// operation. A lookup that found nothing lets one resend go but settles nothing: the
// provider may show what it generated only later, and no row records the lookup, so the
// next sender looks again.

// resumed finds out, before a run that resumes op (no attempt begun for it, an earlier one
// on record) sends anything, whether an earlier attempt may have been executed by a
// provider that takes no key, when the caller did not say so: every path that resumes an
// operation then looks up and counts alike, whatever it read before it called Run.
func (r *runner) resumed(op *Operation) error {
	if r.uncertain || r.spec.First != nil || !r.pol.NoProviderKey || op.Attempts == 0 {
		return nil
	}
	atts, err := r.l.store.Attempts(r.bg, op.ID)
	if err != nil {
		return fmt.Errorf("list the attempts of operation %s: %w", op.ID, err)
	}
	r.uncertain = Uncertain(atts)
	r.possibleDup = r.uncertain
	return nil
}

// sender is the sender the reaper resends op with: s, unless op's provider takes no key and
// an attempt of op may have been executed. The reaper has no lookup to ask first, so it
// leaves that resend to op's client or worker, which look it up (nil: not resent here).
func (r *Reaper) sender(ctx context.Context, op *Operation, s Sender) (Sender, error) {
	if !op.Policy.NoProviderKey {
		return s, nil
	}
	atts, err := r.Ledger.store.Attempts(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("list the attempts of %s: %w", op.ID, err)
	}
	if Uncertain(atts) {
		return nil, nil
	}
	return s, nil
}

// refusedAfter is where a refusal by the provider of attempt a takes op: failed, unless op's
// provider takes no key and an earlier attempt may have been executed. The refusal is the
// provider's word on a alone; where no key ties the attempts together, it shows nothing of
// what the earlier one did, so op is unknown until a lookup or a person settles it (rule 11).
// Under a key the provider answers for the key, and its refusal fails op.
func (l *Ledger) refusedAfter(ctx context.Context, op *Operation, a *Attempt) (Status, error) {
	if !op.Policy.NoProviderKey || a.N <= 1 {
		return StatusFailed, nil
	}
	atts, err := l.store.Attempts(ctx, op.ID)
	if err != nil {
		return "", fmt.Errorf("list the attempts of %s: %w", op.ID, err)
	}
	for i := range atts {
		if atts[i].ID != a.ID && atts[i].Uncertain() {
			return StatusUnknown, nil
		}
	}
	return StatusFailed, nil
}
