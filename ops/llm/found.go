package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// LookFirst is the ledger's lookup before a resend (ops.Hooks.LookFirst) for an LLM
// operation whose earlier attempt may have generated: the provider takes no idempotency key,
// so only its store tells whether a send would generate a second time. Every completion (or
// response) it keeps for op is recorded as a provider charge, when Events is set, and the
// oldest answer settles op, its text stored so the intent replays it. It returns nil when
// the provider holds no answer for op, and when op's calls cannot be looked up at all (no
// store, a store that is off, an API with nothing to look up: Available), where the policy's
// resend goes on, counted as a possible duplicate. When the provider could not be asked, or
// whether it stores completions is not known yet, the error's reason is
// ops.ReasonNotLookedUp: nothing may be sent until it can be asked.
func (k *Lookups) LookFirst(ctx context.Context, op *ops.Operation) (*ops.Found, error) {
	if k.StoreUnknown(ctx, op) {
		return nil, ops.NotLookedUp(op, errors.New("whether the provider stores completions is not known yet"))
	}
	if k.Available(ctx, op) != "" {
		return nil, nil
	}
	found, err := k.Find(ctx, op)
	if err != nil {
		return nil, ops.NotLookedUp(op, err)
	}
	now := k.Ledger.Clock.Now()
	var answers []Stored
	for _, s := range found {
		if k.Events != nil {
			if err := k.Events.RecordCharge(ctx, Record(op, s), op.TenantID, now); err != nil {
				return nil, fmt.Errorf("record %s: %w", Found(op, s.ID), err)
			}
		}
		if s.answered() {
			answers = append(answers, s)
		}
	}
	if len(answers) == 0 {
		return nil, nil
	}
	res, ev := k.answerOf(op, answers, ops.EvidenceLookup)
	ev.Summary += " It was found before the call was sent again, so nothing was sent again."
	return &ops.Found{Evidence: ev, Result: res}, nil
}
