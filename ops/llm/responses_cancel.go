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
	// RequestRef is the client's reference of the request (X-Request-Ref), recorded with it.
	RequestRef string
	// RequestRefFrom names the header RequestRef came from, for a refusal to name it.
	RequestRefFrom string
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
//
// Every cancel is one of its tenant's client requests (ops rule 8): recorded on the
// response's operation before it is sent, so a cancel sent is never one unrecorded, and
// answered with what the provider did (ops.Answer.Cancel); one refused before it named an
// operation of the tenant is recorded as refused, naming none. None is a new intent or a
// duplicate of the create, and none is an attempt: the rates of those stay the calls'.
func (g *Gateway) Cancel(ctx context.Context, c Cancellation, out Sink) error {
	if err := ops.CheckRef(refSourceName(c.RequestRefFrom), c.RequestRef, ops.MaxRefBytes); err != nil {
		// Refused as a create with the same reference is, before anything is sent.
		return g.refuseCancel(ctx, c, err)
	}
	op, up, err := g.tenantResponse(ctx, c.Tenant, c.ID)
	if err != nil {
		return g.refuseCancel(ctx, c, err)
	}
	crID, err := g.cfg.Ledger.RecordRequest(ctx, ops.RequestParams{TenantID: op.TenantID, OperationID: op.ID, Kind: op.Kind,
		RequestRef: ops.CleanRef(c.RequestRef)})
	if err != nil {
		return fmt.Errorf("record the cancel of response %s: %w", c.ID, err)
	}
	// Once sent, the cancel is the provider's to carry out whether or not its client still
	// waits: its answer is read, recorded, and the operation settled, all the same.
	bg := context.WithoutCancel(ctx)
	r := up.Send(bg, Call{Method: http.MethodPost, Path: cancelPath(c.ID), OperationID: op.ID, TenantID: op.TenantID, Attempt: op.Attempts})
	answer, ended, err := g.relayCancel(bg, op, c.ID, r, out)
	if aerr := g.cfg.Ledger.Answer(bg, crID, answer); aerr != nil {
		g.cfg.Logger.WarnContext(bg, "record the answer of a cancel", "operation", op.ID, "answer", answer, "err", aerr)
	}
	if ended {
		g.settleCancelled(bg, op)
	}
	return err
}

// relayCancel relays the provider's answer r to the cancel of response id, and returns what
// the cancel is recorded as answered and whether the answer shows the response ended.
func (g *Gateway) relayCancel(ctx context.Context, op *ops.Operation, id string, r Reply, out Sink) (ops.Answer, bool, error) {
	if r.Outcome != ops.OutcomeOK {
		err := readError(op, id, r)
		if r.Outcome == ops.OutcomeInvalid && r.HTTPStatus != http.StatusNotFound {
			// Refused, as a response that ended already is: its end settles the
			// operation if nothing else has.
			g.settleLookup(ctx, op, cancelActor)
			return g.refusedCancelAnswer(ctx, op), false, err
		}
		return cancelRefusalAnswer(err), false, err
	}
	s, ok := readState(r.Body)
	if !ok || s.ID != id {
		return ops.AnswerCancelFailed, false, &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonBadResponse, Err: &Problem{UpstreamStatus: r.HTTPStatus},
			Message: fmt.Sprintf("The provider's answer to the cancel was not response %s; read it at GET /v1/responses/%s to see whether it was cancelled.", id, id)}
	}
	ended := !running(s.Status)
	if err := out.Begin(Head{OperationID: op.ID, ProviderRequestID: r.RequestID, Length: len(r.Body), Close: ended}); err == nil {
		_ = out.Write(r.Body)
	}
	if ended && s.Status != responseCancelled {
		return ops.AnswerCancelTooLate, true, nil
	}
	return ops.AnswerCancelled, ended, nil
}

// refusedCancelAnswer is the answer of a cancel the provider refused: too late when op had
// ended by then (the lookup that follows the refusal closes it from the provider's record),
// refused otherwise (a response the provider cannot cancel, still running).
func (g *Gateway) refusedCancelAnswer(ctx context.Context, op *ops.Operation) ops.Answer {
	if cur, err := g.cfg.Ledger.Get(ctx, op.ID); err == nil && cur.Status.Final() {
		return ops.AnswerCancelTooLate
	}
	return ops.AnswerCancelRefused
}

// cancelRefusalAnswer is the answer of a cancel that ended in err without an answer of the
// provider's to relay: refused when Settle or the provider refused it, failed when the
// provider or the ledger could not be asked, which says nothing of whether it was cancelled.
func cancelRefusalAnswer(err error) ops.Answer {
	if code := ops.ErrorCode(err); code == ops.ENOTFOUND || code == ops.EINVALID {
		return ops.AnswerCancelRefused
	}
	return ops.AnswerCancelFailed
}

// refuseCancel records a cancel refused before it named one of the tenant's operations (an
// id not the tenant's, a malformed one) as the canceller's refused request, naming no
// operation, not even another tenant's whose id it was (ops rule 8), and returns its answer.
// A request without a tenant is no tenant's to record.
func (g *Gateway) refuseCancel(ctx context.Context, c Cancellation, refusal error) error {
	return g.recordRefusedCancel(ctx, c, cancelRefusalAnswer(refusal), refusal)
}

// RefuseCancel records a cancel refused before the gateway read it (its tenant had its share
// of the server's requests in flight) as the tenant's refused cancel, naming no operation
// (ops rule 8), and returns its answer as Ledger.Refuse does.
func (g *Gateway) RefuseCancel(ctx context.Context, tenant *ops.Tenant, requestRef string, refusal error) error {
	return g.recordRefusedCancel(ctx, Cancellation{Tenant: tenant, RequestRef: requestRef}, ops.AnswerCancelRefused, refusal)
}

func (g *Gateway) recordRefusedCancel(ctx context.Context, c Cancellation, answer ops.Answer, refusal error) error {
	if c.Tenant == nil || c.Tenant.ID <= 0 {
		return refusal
	}
	return g.cfg.Ledger.RefuseAs(ctx, ops.RequestParams{TenantID: c.Tenant.ID, Kind: ops.KindLLMCall,
		RequestRef: ops.CleanRef(c.RequestRef), Answer: answer}, refusal)
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
