package llm

import (
	"context"
	"net/http"

	"github.com/settle-dev/settle/ops"
)

// share is what the transport says of the tenant's places on this server: busy refuses a
// request that would start a generation (Request.Busy), following is told when the request
// goes on only to follow a background response (Request.Following).
type share struct {
	busy      func(opID string) error
	following func()
}

// following tells the transport, once, that the request goes on only to follow its
// background response at the provider: its client has all it gets.
func (x *exchange) following() {
	if f := x.share.following; f != nil {
		x.share.following = nil
		f()
	}
}

// admitCheck is admission's check before it opens an operation: a request the transport let
// in only to read or follow is refused as the tenant's share refuses (nothing is opened or
// sent, and admission records the refusal: ops rule 8); any other is held to its tenant's
// budget (budgetCheck).
func (x *exchange) admitCheck(ctx context.Context) func(context.Context) error {
	if busy := x.share.busy; busy != nil {
		return func(context.Context) error {
			x.g.stats.rejected.Add(1)
			return busy("")
		}
	}
	return x.budgetCheck(ctx, callSaid, true)
}

// resendCheck is the check of attempt a when it is not the first of a new operation: nil
// when the send generates nothing new (onlyFollows) or neither the share nor the budget
// holds it; otherwise the share's refusal of a request let in only to read or follow, or
// the budget's check of a resend.
func (x *exchange) resendCheck(ctx context.Context, a *ops.Attempt) func(context.Context) error {
	busy := x.share.busy
	if busy == nil && (x.tenant.LLMBudgetMicros <= 0 || x.g.cfg.Budgets == nil) {
		return nil
	}
	if x.onlyFollows(ctx, a) {
		return nil
	}
	if busy != nil {
		return func(context.Context) error {
			x.g.stats.rejected.Add(1)
			return busy(a.OperationID)
		}
	}
	return x.budgetCheck(ctx, resendSaid(a.OperationID), false)
}

// earlierRead is a read of the response an earlier attempt created, made for attempt before
// its send.
type earlierRead struct {
	attempt int
	id      string
	now     Reply
}

// onlyFollows reports whether attempt a of a background request goes on with the response
// an earlier attempt of its operation created and the provider still runs, ended with an
// answer, or cancelled: such a send follows, answers or ends the request and generates
// nothing (continueEarlier), so neither the tenant's budget nor its share holds it back.
// Anything else (no response recorded, one that failed or that the provider does not
// hold, a provider that could not be asked) may create the response again and is held as
// any send. The read is kept for the send, which does not ask again.
func (x *exchange) onlyFollows(ctx context.Context, a *ops.Attempt) bool {
	b, ok := x.up.(*backgroundUpstream)
	if !ok || a.N <= 1 {
		return false
	}
	c := Call{OperationID: a.OperationID, TenantID: x.tenant.ID, Attempt: a.N}
	id, now, err := b.readEarlier(ctx, c)
	if err != nil || id == "" {
		return false
	}
	b.earlier = &earlierRead{attempt: a.N, id: id, now: now}
	s, ok := readState(now.Body)
	if now.Outcome != ops.OutcomeOK || !ok || s.ID != id {
		return false
	}
	return running(s.Status) || answeredStatus(s.Status) || s.Status == responseCancelled
}

// readEarlier reads, as the provider has it now, the response the latest earlier attempt of
// c's operation recorded; id is "" when none did. A read made for this attempt before its
// send (onlyFollows) is used instead of asking again.
func (b *backgroundUpstream) readEarlier(ctx context.Context, c Call) (id string, now Reply, err error) {
	if e := b.earlier; e != nil && e.attempt == c.Attempt {
		b.earlier = nil
		return e.id, e.now, nil
	}
	if id, err = b.x.lastResponseID(ctx, c.OperationID); err != nil || id == "" {
		return id, Reply{}, err
	}
	now = b.up.Send(ctx, Call{Method: http.MethodGet, Path: readPath(id, false, 0), OperationID: c.OperationID, TenantID: c.TenantID, Attempt: c.Attempt})
	return id, now, nil
}
