package llm

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/settle-dev/settle/ops"
)

// ResponseOwners finds whose a provider's response id is: ops/pg implements it, and the
// gateway reads it through Config.Refs. The provider's account is shared by every tenant, so
// an id is answered only for the tenant whose operation recorded it.
type ResponseOwners interface {
	// ResponseOperation returns the id of tenantID's LLM call one of whose attempts recorded
	// ref as the provider's id of its answer, or an ENOTFOUND error.
	ResponseOperation(ctx context.Context, tenantID int64, ref string) (string, error)
}

// Retrieval is a client's GET /v1/responses/{id}.
type Retrieval struct {
	Tenant *ops.Tenant
	// ID is the response id (resp_…).
	ID string
	// Stream asks for the response's events (stream=true); After is starting_after, the
	// sequence number after which they start, -1 from the first.
	Stream bool
	After  int
}

// retrieveActor is who closes an operation from a response its client read.
const retrieveActor = "llm gateway (response read by its client)"

// Retrieve answers GET /v1/responses/{id} for a tenant: only a response one of the tenant's
// own calls through Settle created (its id recorded on an attempt), never any other the
// provider's account holds. A response Settle stored as its call's answer is answered from
// Settle's store; any other (still running, or a stream asked for) is read at the provider
// and passed on as the provider gives it, a stream after starting_after. A read that finds
// the response ended settles its operation if it is still open, as a lookup does (ops rules 9
// and 11): completed as succeeded with the response and its cost, failed or cancelled as
// failed.
func (g *Gateway) Retrieve(ctx context.Context, r Retrieval, out Sink) error {
	op, up, err := g.tenantResponse(ctx, r.Tenant, r.ID)
	if err != nil {
		return err
	}
	if !r.Stream && op.Status == ops.StatusSucceeded && op.ProviderRef == r.ID && len(op.Result) > 0 && op.PurgedAt == nil {
		if err := out.Begin(Head{OperationID: op.ID, ProviderRequestID: op.ProviderRequestID, Length: len(op.Result)}); err == nil {
			_ = out.Write(op.Result)
		}
		return nil
	}
	c := Call{Method: http.MethodGet, Path: readPath(r.ID, false, 0), OperationID: op.ID, TenantID: op.TenantID, Attempt: op.Attempts}
	if !r.Stream {
		now := up.Send(ctx, c)
		if now.Outcome != ops.OutcomeOK {
			return readError(op, r.ID, now)
		}
		if err := out.Begin(Head{OperationID: op.ID, ProviderRequestID: now.RequestID, Length: len(now.Body)}); err == nil {
			_ = out.Write(now.Body)
		}
		if s, ok := readState(now.Body); ok && !running(s.Status) {
			g.settleRead(context.WithoutCancel(ctx), op)
		}
		return nil
	}
	began := false
	relay := func(d []byte, _ bool) error {
		if !began {
			began = true
			if err := out.Begin(Head{Stream: true, OperationID: op.ID}); err != nil {
				return err
			}
		}
		return out.Write(typedSSE(d))
	}
	t := newTracker(r.After)
	last := follow(ctx, up, time.Now().Add(g.cfg.Deadline), c, r.ID, t, relay, func() bool { return t.ended }, Reply{})
	switch {
	case !began && last.Outcome != ops.OutcomeOK:
		return readError(op, r.ID, last)
	case last.Outcome != ops.OutcomeOK && !t.stopped:
		_ = out.Write(responsesAPI{}.streamError(&ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonUpstreamError,
			Message: fmt.Sprintf("The provider's stream of response %s broke off; read it again after the last sequence number received.", r.ID)}))
	}
	if t.ended {
		g.settleRead(context.WithoutCancel(ctx), op)
	}
	return nil
}

// tenantResponse is the operation of tenant's call through Settle that recorded response id
// on one of its attempts, and the provider of responses. The provider's account is shared by
// every tenant, so any other id, whether another tenant's call created it or none through
// Settle did, is not found, though the provider may hold it: nothing is asked of the
// provider for it.
func (g *Gateway) tenantResponse(ctx context.Context, tenant *ops.Tenant, id string) (*ops.Operation, Upstream, error) {
	if tenant == nil || tenant.ID <= 0 {
		return nil, nil, ops.Errorf(ops.EUNAUTHORIZED, "A tenant is required.")
	}
	up := g.upstream(responsesRoute)
	owners, _ := g.cfg.Refs.(ResponseOwners)
	if up == nil || owners == nil {
		return nil, nil, ops.Errorf(ops.ENOTFOUND, "Responses cannot be read or cancelled through this server.")
	}
	if err := ops.CheckRef("response id", id, ops.MaxRefBytes); err != nil {
		return nil, nil, err
	}
	notFound := ops.Errorf(ops.ENOTFOUND, "No response %s was created through Settle with this tenant's tokens.", id)
	opID, err := owners.ResponseOperation(ctx, tenant.ID, id)
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		return nil, nil, notFound
	}
	if err != nil {
		return nil, nil, err
	}
	op, err := g.cfg.Ledger.Get(ctx, opID)
	if err != nil {
		return nil, nil, err
	}
	if op.TenantID != tenant.ID || routeOf(op) != responsesRoute {
		return nil, nil, notFound
	}
	return op, up, nil
}

// readError says why the provider's response could not be read.
func readError(op *ops.Operation, id string, r Reply) error {
	p := &Problem{UpstreamStatus: r.HTTPStatus}
	switch {
	case r.HTTPStatus == http.StatusNotFound:
		return &ops.Error{Code: ops.ENOTFOUND, Err: p, Message: fmt.Sprintf("%s holds no response %s (any more).", op.Provider, id)}
	case r.Outcome == ops.OutcomeInvalid && r.ErrorCode != "upstream_auth":
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonRefused, Err: p, Message: "The provider refused the request: " + r.Message}
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonUpstreamError, Err: p,
		Message: fmt.Sprintf("%s could not be asked for response %s; try again shortly.", op.Provider, id)}
}

// settleRead settles op, still open, from the responses its attempts recorded, once its
// client read one that ended: the lookup the desk and the reconciler make, which closes it
// only when nobody is sending for it.
func (g *Gateway) settleRead(ctx context.Context, op *ops.Operation) {
	g.settleLookup(ctx, op, retrieveActor)
}

// settleLookup is settleRead by actor.
func (g *Gateway) settleLookup(ctx context.Context, op *ops.Operation, actor string) {
	if op.Status.Final() {
		return
	}
	k := g.responseLookups()
	if k == nil {
		return
	}
	cur, err := g.cfg.Ledger.Get(ctx, op.ID)
	if err == nil && !cur.Status.Final() {
		_, _, err = k.Lookup(ctx, cur, actor)
	}
	if err != nil {
		g.cfg.Logger.WarnContext(ctx, "settle a response read by its client", "operation", op.ID, "err", err)
	}
}

// responseLookups is the lookup of responses by their recorded ids the gateway can make
// itself: the provider's store of responses (Stored, or the provider of the route when it
// reads its own) and the store that records attempts' ids and provider charges (Refs). Nil
// when either is missing.
func (g *Gateway) responseLookups() *Lookups {
	store, ok := g.cfg.Stored.(interface {
		StoredCompletions
		StoredResponses
	})
	if !ok {
		store, ok = g.upstream(responsesRoute).(interface {
			StoredCompletions
			StoredResponses
		})
	}
	events, _ := g.cfg.Refs.(ops.EventStore)
	refs, _ := g.cfg.Refs.(AttemptRefReader)
	if !ok || events == nil || refs == nil {
		return nil
	}
	return &Lookups{Ledger: g.cfg.Ledger, Events: events, Store: store, Prices: g.cfg.Prices, Refs: refs}
}
