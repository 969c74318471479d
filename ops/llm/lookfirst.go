package llm

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// lookFirst is the ledger's lookup before a resend (ops.Hooks.LookFirst) for this request:
// before a send that follows an attempt whose outcome is uncertain, where the call's API has
// a lookup at the provider (a stored chat completion by Settle's metadata, a response by the
// id recorded on its attempt), it asks what that attempt generated. The provider takes no
// idempotency key, so a resend would generate and bill again. An answer found closes the
// operation with the lookup as its evidence and no attempt of its own (ops/lookfirst.go):
// the attempt that billed is the earlier one, so the counts of sends and possible
// duplicates stay counts of generations asked for, and *lookedUp is set for the answer.
// When the lookup shows nothing the send goes on; so it does when the provider cannot be
// asked, since the client is waiting (the policy's resend, counted as a possible duplicate).
// Any other error (what was found could not be recorded) ends the request with nothing sent.
func (x *exchange) lookFirst(lookedUp *bool) func(ctx context.Context, op *ops.Operation) (*ops.Found, error) {
	return func(ctx context.Context, op *ops.Operation) (*ops.Found, error) {
		found, err := x.lookups().LookFirst(ctx, op)
		if ops.ErrorReason(err) == ops.ReasonNotLookedUp {
			x.g.cfg.Logger.WarnContext(ctx, "look up an uncertain attempt before resending", "operation", op.ID, "err", err)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		*lookedUp = found != nil
		return found, nil
	}
}

// lookups reads the gateway's provider the way the desk and the reconciler do.
func (x *exchange) lookups() *Lookups {
	k := &Lookups{Ledger: x.g.cfg.Ledger, Store: x.g.cfg.Stored, Prices: x.g.cfg.Prices}
	// The store that records the attempts' ids (ops/pg) reads them too, and records what a
	// lookup finds as the provider's charge.
	k.Refs, _ = x.g.cfg.Refs.(AttemptRefReader)
	k.Events, _ = x.g.cfg.Refs.(ops.EventStore)
	return k
}

// canLookUp reports whether what an attempt of op generated can be read at the provider.
func (x *exchange) canLookUp(op *ops.Operation) bool {
	return x.g.cfg.Stored != nil && x.lookups().Available(context.WithoutCancel(x.ctx), op) == ""
}
