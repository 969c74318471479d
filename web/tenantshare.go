package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/mcptool"
)

// ReasonTenantBusy is the code of an API request refused with 429 because its tenant
// already has Server.MaxInFlightPerTenant requests in flight on this server.
const ReasonTenantBusy = "tenant_busy"

// tenantBusyMessage tells a refused client why, that nothing was sent, and when to come back.
const tenantBusyMessage = "Your tenant has as many API requests in flight on this Settle server as one tenant may; " +
	"this one was recorded as refused and nothing of it was sent. Send it again in a second, or once one of your " +
	"requests in flight has ended."

// tenantBusyResendMessage is tenantBusyMessage for a retry that would send its operation (%s)
// again: its earlier attempts were sent, so it may not say that nothing of the call was
// (ops rule 12).
const tenantBusyResendMessage = "Your tenant has as many API requests in flight on this Settle server as one tenant may; " +
	"this retry was recorded as refused and sent nothing more; its operation %s, whose earlier attempts were sent, stays open " +
	"for its key and goes on with a retry once one of your requests in flight has ended."

// tenantShare bounds the API requests in flight per tenant, so that one tenant's slow
// requests cannot take every place of the shedder's cap, which counts requests before their
// tenant is known. It runs after the token check, on each route, and records what it
// refuses as the route records its own refusals (ops rule 8): the request named its tenant.
//
// A background response of the Responses API keeps its request, and so its place, until the
// gateway's following of it at the provider ends (it ended, was cancelled, or the follow gave
// up), though its client had the queued response at once: the share bounds a tenant's
// background calls as it bounds its other calls, and with them what a tenant's LLM budget
// may overshoot by (the calls in flight when it is reached). Such a place is lent to the
// tenant's requests that start no generation: with every place taken, a read or a cancel of
// a response is still served, one per place held by a follow, and a gateway call is let in
// to be served only if it replays or follows what is already running (llm.Request.Busy);
// a tenant never holds more than twice its share.
type tenantShare struct {
	max int
	srv *Server
	// refused counts the refusals by route and tenant: only tenants whose token was checked
	// reach it, so the tenant label takes no more values than the ledger's metrics have.
	refused *prometheus.CounterVec

	mu sync.Mutex
	// inFlight holds the tenants with requests in flight; a tenant with none has no entry.
	inFlight map[int64]tenantLoad
}

// tenantLoad is what a tenant holds: its requests in flight, and how many of them only follow
// a background response whose client has its answer.
type tenantLoad struct {
	n, following int
}

// lending says what a route's request may do with the places a tenant's follows hold.
type lending int

const (
	// lendNone: the request is refused once the tenant holds its share.
	lendNone lending = iota
	// lendRead: a read or a cancel of a response, which starts no generation.
	lendRead
	// lendCall: a gateway call, let in to be served only where it starts no generation.
	lendCall
)

func newTenantShare(s *Server) *tenantShare {
	ts := &tenantShare{max: s.MaxInFlightPerTenant, srv: s, inFlight: map[int64]tenantLoad{},
		refused: register(s.Registry, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_http_tenant_share_refused_total",
			Help: "API requests refused with 429 because their tenant had SETTLE_MAX_IN_FLIGHT_PER_TENANT in flight on this " +
				"server, by route pattern and tenant; each paid one is also recorded as the tenant's rejected client request.",
		}, []string{"route", "tenant"}))}
	if ts.max <= 0 || (s.MaxInFlight > 0 && ts.max >= s.MaxInFlight) {
		ts.max = 0
	}
	return ts
}

// recordRefusal records a request of tenant refused before its handler read it as that
// route records its refusals, and returns the answer: refusal, or the outage that kept it
// from being recorded. Routes that only read (an operation, a job, a stored response) record
// nothing when served, and pass none.
type recordRefusal func(r *http.Request, tenant *ops.Tenant, refusal error) error

// limit counts a request against its tenant's share until its handler returns, or refuses
// it when the tenant already has its share in flight. Place it after the token check.
func (ts *tenantShare) limit(record recordRefusal) func(http.Handler) http.Handler {
	return ts.lend(record, lendNone)
}

// lend is limit for a route whose requests may use the places the tenant's follows hold, as
// lending says.
func (ts *tenantShare) lend(record recordRefusal, lending lending) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := tenantFrom(r.Context())
			if ts.max <= 0 || t == nil {
				next.ServeHTTP(w, r)
				return
			}
			sl := ts.take(t.ID, lending)
			if sl == nil {
				ts.refuse(w, r, t, record)
				return
			}
			defer sl.release()
			if lending == lendCall {
				// The gateway tells the place when it only follows, and asks it whether it may
				// start a generation.
				r = r.WithContext(context.WithValue(r.Context(), shareSlotKey{}, sl))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// shareSlot is one request's place in its tenant's share.
type shareSlot struct {
	ts     *tenantShare
	tenant int64
	// lent says the place is one a follow lends: the request may start no generation.
	lent bool
	// following says the request only follows a background response (under ts.mu).
	following bool
}

type shareSlotKey struct{}

// shareSlotFrom is the request's place, nil when its route lends none or there is no share.
func shareSlotFrom(r *http.Request) *shareSlot {
	sl, _ := r.Context().Value(shareSlotKey{}).(*shareSlot)
	return sl
}

// take counts one more request of the tenant and returns its place, or nil when its share is
// taken and lending gives it none of the places its follows hold.
func (ts *tenantShare) take(tenantID int64, lending lending) *shareSlot {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	l := ts.inFlight[tenantID]
	lent := false
	switch {
	case l.n < ts.max:
	case lending != lendNone && l.n < ts.max+l.following && l.n < 2*ts.max:
		lent = lending == lendCall
	default:
		return nil
	}
	l.n++
	ts.inFlight[tenantID] = l
	return &shareSlot{ts: ts, tenant: tenantID, lent: lent}
}

// follow says the request goes on only to follow its background response: its place is
// lent to the tenant's reads, cancels and retries from now on (llm.Request.Following).
func (sl *shareSlot) follow() {
	ts := sl.ts
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if sl.following {
		return
	}
	sl.following = true
	l := ts.inFlight[sl.tenant]
	l.following++
	ts.inFlight[sl.tenant] = l
}

// release ends the request; a tenant with none left is forgotten, so the map holds only the
// tenants in flight. The handler's deferred call is the only one, whatever ended the request
// (its follow's end, a failure, a panic, a shutdown), so a place is released once.
func (sl *shareSlot) release() {
	ts := sl.ts
	ts.mu.Lock()
	defer ts.mu.Unlock()
	l := ts.inFlight[sl.tenant]
	l.n--
	if sl.following {
		l.following--
	}
	if l.n <= 0 {
		delete(ts.inFlight, sl.tenant)
		return
	}
	ts.inFlight[sl.tenant] = l
}

// busy is the share's refusal of a gateway call let in on a lent place that would start a
// generation: a new call (opID ""), or a resend of operation opID. It is counted as the
// share counts its refusals; the gateway records it as the tenant's refused request.
func (ts *tenantShare) busy(r *http.Request, t *ops.Tenant, opID string) error {
	ts.refused.WithLabelValues(requestRoute(r), t.Name).Inc()
	msg := tenantBusyMessage
	if opID != "" {
		msg = fmt.Sprintf(tenantBusyResendMessage, opID)
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonTenantBusy, Message: msg, Err: &llm.Problem{RetryAfter: shedRetryAfter}}
}

// refuse answers 429 with Retry-After, once the refusal is recorded.
func (ts *tenantShare) refuse(w http.ResponseWriter, r *http.Request, t *ops.Tenant, record recordRefusal) {
	ts.refused.WithLabelValues(requestRoute(r), t.Name).Inc()
	var err error = &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonTenantBusy, Message: tenantBusyMessage,
		Err: &llm.Problem{RetryAfter: shedRetryAfter}}
	if record != nil {
		err = record(r, t, err)
	}
	ts.srv.Error(w, r, err)
}

// headerRef is the request's reference from its headers: a refused request's body is not
// read, so a request_ref sent in it is not known.
func headerRef(r *http.Request) string {
	ref, _ := refSource(r, "")
	return ops.CleanRef(ref)
}

// refuseLLMCall records a gateway call refused before the gateway read it.
func (s *Server) refuseLLMCall(r *http.Request, t *ops.Tenant, refusal error) error {
	if s.LLM == nil {
		return refusal
	}
	return s.LLM.Refuse(r.Context(), t.ID, headerRef(r), refusal)
}

// refuseCancel records a cancel of a response refused before the gateway read it: a cancel
// is one of its tenant's client requests, as a call is.
func (s *Server) refuseCancel(r *http.Request, t *ops.Tenant, refusal error) error {
	g, ok := s.LLM.(ResponseCanceller)
	if !ok {
		return refusal
	}
	return g.RefuseCancel(r.Context(), t, headerRef(r), refusal)
}

// refuseRefund records a refund request refused before it was read.
func (s *Server) refuseRefund(r *http.Request, t *ops.Tenant, refusal error) error {
	return s.Refunds.Refuse(r.Context(), t.ID, headerRef(r), refusal)
}

// refuseJob records a job submission refused before it was read.
func (s *Server) refuseJob(r *http.Request, t *ops.Tenant, refusal error) error {
	if s.Jobs == nil {
		return refusal
	}
	return s.Jobs.Refuse(r.Context(), t.ID, headerRef(r), refusal)
}

// refuseMCP records each tool call of a refused MCP message as the calls the SDK refuses are
// recorded (Tools.RefuseCall: a refund_status call records nothing, as when it is served),
// under the reference the tool would have recorded it under; the message's other parts
// (listing tools, the protocol's own messages) record nothing when served either. Only the
// first bytes of a body over the limit are read, and the calls they show are recorded.
func (s *Server) refuseMCP(tools *mcptool.Tools) recordRefusal {
	return func(r *http.Request, t *ops.Tenant, refusal error) error {
		body, err := io.ReadAll(io.LimitReader(r.Body, mcpMaxBody+1))
		if err != nil {
			return refusal
		}
		return recordMCPCalls(r, tools, mcptool.ToolCalls(body), refusal)
	}
}
