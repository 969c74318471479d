package llm

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// lookUpBeforeResend runs before a send that follows an attempt whose outcome is uncertain,
// where the call's API has a lookup at the provider (a stored chat completion by Settle's
// metadata, a response by the id recorded on its attempt): the provider takes no
// idempotency key, so the earlier attempt may have generated, and a resend would generate
// and bill again. An answer found is the attempt's result, and nothing is sent (ok); when
// the lookup shows nothing, or cannot be made, the send goes on as before.
func (x *exchange) lookUpBeforeResend(ctx context.Context, op *ops.Operation) (ops.AttemptResult, bool) {
	g := x.g
	k := x.lookups()
	if !x.canLookUp(op) {
		return ops.AttemptResult{}, false
	}
	found, err := k.Find(ctx, op)
	if err != nil {
		g.cfg.Logger.WarnContext(ctx, "look up an uncertain attempt before resending", "operation", op.ID, "err", err)
		return ops.AttemptResult{}, false
	}
	for _, s := range found {
		if !s.answered() {
			continue
		}
		res, err := ResultOf(s, g.cfg.Prices)
		if err != nil {
			return ops.AttemptResult{}, false
		}
		// The attempt consumed nothing itself: the generation and its cost belong to the
		// earlier attempt the provider answered.
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: s.RequestID, Result: res}, true
	}
	return ops.AttemptResult{}, false
}

// lookups reads the gateway's provider the way the desk and the reconciler do.
func (x *exchange) lookups() *Lookups {
	k := &Lookups{Store: x.g.cfg.Stored, Prices: x.g.cfg.Prices}
	// The store that records the attempts' ids (ops/pg) reads them too.
	k.Refs, _ = x.g.cfg.Refs.(AttemptRefReader)
	return k
}

// canLookUp reports whether what an attempt of op generated can be read at the provider.
func (x *exchange) canLookUp(op *ops.Operation) bool {
	return x.g.cfg.Stored != nil && x.lookups().Available(context.WithoutCancel(x.ctx), op) == ""
}
