package ops

import (
	"context"
	"fmt"
	"strings"
)

// A provider may bill a call that ends without an answer: an LLM response cancelled, or
// failed, part-way through its generation is billed for the prompt it read and the tokens it
// generated. Its operation fails, since nothing was answered, but it was not free, and what
// the provider billed is its cost. CloseBilled is the close that says both.

// CloseBilled closes an operation nobody is sending for as failed, as Close does with every
// check of rules 6 and 11, from the provider's own record of a generation that ended without
// an answer (p.Evidence, which names the record), and stores billed with it: the record's
// id, and the usage and cost the provider reports for it. The cost is added to the
// operation's, so a failed call counts what it cost; a record that reports no usage (a
// response cancelled before it left the queue) bills nothing, and the close still names it
// as the operation's provider reference. billed carries no answer, and names the record the
// evidence names; a close carried out by an approval goes through Close.
func (l *Ledger) CloseBilled(ctx context.Context, p CloseParams, billed Result) (*Operation, error) {
	switch {
	case p.To != StatusFailed:
		return nil, Errorf(EINVALID, "Only a close as failed stores what the provider billed without answering.")
	case p.Approval != nil || p.Result != nil:
		return nil, Errorf(EINVALID, "A close with what the provider billed carries neither an approval nor an answer.")
	case !p.Evidence.Kind.FromProvider() || p.Evidence.ProviderRef == "" || billed.ProviderRef != p.Evidence.ProviderRef:
		return nil, Errorf(EINVALID, "What the provider billed is stored only with the provider's own record of it, not %q.", billed.ProviderRef)
	case len(billed.Body) > 0 || len(billed.Events) > 0:
		return nil, Errorf(EINVALID, "A failed operation keeps no answer of the provider's.")
	}
	if strings.TrimSpace(p.Actor) == "" {
		return nil, Errorf(EINVALID, "Closing needs an actor.")
	}
	op, err := l.store.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if op.Version != p.Version && !op.Status.Final() {
		return nil, Errorf(ECONFLICT, "Operation %s changed since you looked (version %d, now %d, %s). Reload and try again.", op.ID, p.Version, op.Version, op.Status)
	}
	now := l.Clock.Now()
	if err := CheckClose(op, p.To, p.Evidence, now); err != nil {
		return nil, err
	}
	attempts, err := l.store.Attempts(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	if err := CheckFail(op, attempts, p.Evidence, op.Policy, now, l.Limits); err != nil {
		return nil, err
	}
	ev := p.Evidence
	ev.RecordedBy, ev.RecordedAt = p.Actor, now
	return l.transition(ctx, op, TransitionParams{ID: op.ID, Version: p.Version, From: op.Status, To: StatusFailed,
		Now: now, Actor: p.Actor, Action: "close", Reason: ev.Summary, Evidence: &ev, RequireLeaseExpired: true,
		Result: &billed})
}
