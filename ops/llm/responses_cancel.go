package llm

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Cancelling a background response (POST /v1/responses/{id}/cancel). The provider stops a
// background response that is still queued or in progress and keeps it as cancelled, billed
// for what it used; it answers a cancel of a response that ended otherwise, or that was not
// created in background mode, with an error. Settle forwards a tenant's cancel once, only for
// a response one of the tenant's own calls created, and relays the provider's answer. The
// operation then settles from the provider's own record, as a lookup closes it (ops rule 9):
// a cancelled response as failed, with what the provider billed for it as its cost; one
// that completed before the cancel arrived as succeeded, with its answer. The request that
// follows the response ends its attempt when the provider ends the response, and never
// creates a cancelled response again (responses_background.go).

// Cancellation is a client's POST /v1/responses/{id}/cancel.
type Cancellation struct {
	Tenant *ops.Tenant
	// ID is the response id (resp_…).
	ID string
}

// cancelActor is who closes an operation from the response its client cancelled.
const cancelActor = "llm gateway (response cancelled by its client)"

// cancelSettleWait bounds how long a cancel waits for the request that follows the response
// to give it up before the operation is settled; past it, the operation is left to the
// lookups of the desk and the reconciler, as any call whose request ended uncertain.
const cancelSettleWait = 10 * time.Second

// cancelPath is the provider's path that cancels response id.
func cancelPath(id string) string { return "/responses/" + id + "/cancel" }

// Cancel answers POST /v1/responses/{id}/cancel for a tenant: only for a response one of the
// tenant's own calls through Settle created (tenantResponse); any other id is not found and
// nothing is sent to the provider. The cancel is sent to the provider once, never again by
// Settle, and its answer is relayed: the response as the provider now has it, or its refusal.
// A response the answer shows ended settles its operation if it is still open, once nobody
// follows the response any more (ops rules 6, 9 and 11); a refusal settles it as a read
// would, when the response ended before the cancel.
func (g *Gateway) Cancel(ctx context.Context, c Cancellation, out Sink) error {
	op, up, err := g.tenantResponse(ctx, c.Tenant, c.ID)
	if err != nil {
		return err
	}
	// Once sent, the cancel is the provider's to carry out whether or not its client still
	// waits: its answer is read, and the operation settled, all the same.
	bg := context.WithoutCancel(ctx)
	r := up.Send(bg, Call{Method: http.MethodPost, Path: cancelPath(c.ID), OperationID: op.ID, TenantID: op.TenantID, Attempt: op.Attempts})
	if r.Outcome != ops.OutcomeOK {
		if r.Outcome == ops.OutcomeInvalid && r.HTTPStatus != http.StatusNotFound {
			// Refused, as a response that ended already is: its end settles the
			// operation if nothing else has.
			g.settleLookup(bg, op, cancelActor)
		}
		return readError(op, c.ID, r)
	}
	s, ok := readState(r.Body)
	if !ok || s.ID != c.ID {
		return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonBadResponse, Err: &Problem{UpstreamStatus: r.HTTPStatus},
			Message: fmt.Sprintf("The provider's answer to the cancel was not response %s; read it at GET /v1/responses/%s to see whether it was cancelled.", c.ID, c.ID)}
	}
	ended := !running(s.Status)
	if err := out.Begin(Head{OperationID: op.ID, ProviderRequestID: r.RequestID, Length: len(r.Body), Close: ended}); err == nil {
		_ = out.Write(r.Body)
	}
	if ended {
		g.settleCancelled(bg, op)
	}
	return nil
}

// settleCancelled settles op, whose response ended, once nobody sends for it: the request
// that follows the response (in this process or another) gives it up when the provider ends
// it, and the lookup of responses then closes op from the provider's record (settleRead). A
// close is never made under the lease of a request still running (ops rule 6).
func (g *Gateway) settleCancelled(ctx context.Context, op *ops.Operation) {
	deadline := time.Now().Add(cancelSettleWait)
	if f := g.flights.get(op.ID); f != nil {
		t := time.NewTimer(cancelSettleWait)
		select {
		case <-f.done:
		case <-t.C:
		}
		t.Stop()
	}
	for poll := 20 * time.Millisecond; ; poll = min(poll*2, 500*time.Millisecond) {
		cur, err := g.cfg.Ledger.Get(ctx, op.ID)
		if err != nil {
			g.cfg.Logger.WarnContext(ctx, "settle a cancelled response", "operation", op.ID, "err", err)
			return
		}
		if cur.Status.Final() {
			return
		}
		if !cur.Leased(g.clock.Now()) {
			g.settleLookup(ctx, cur, cancelActor)
			return
		}
		if time.Now().Add(poll).After(deadline) {
			g.cfg.Logger.InfoContext(ctx, "a cancelled response is still followed; its operation is left to the lookups", "operation", op.ID)
			return
		}
		time.Sleep(poll)
	}
}
