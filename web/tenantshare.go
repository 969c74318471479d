package web

import (
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

// tenantShare bounds the API requests in flight per tenant, so that one tenant's slow
// requests cannot take every place of the shedder's cap, which counts requests before their
// tenant is known. It runs after the token check, on each route, and records what it
// refuses as the route records its own refusals (ops rule 8): the request named its tenant.
type tenantShare struct {
	max int
	srv *Server
	// refused counts the refusals by route and tenant: only tenants whose token was checked
	// reach it, so the tenant label takes no more values than the ledger's metrics have.
	refused *prometheus.CounterVec

	mu sync.Mutex
	// inFlight holds the tenants with requests in flight; a tenant with none has no entry.
	inFlight map[int64]int
}

func newTenantShare(s *Server) *tenantShare {
	ts := &tenantShare{max: s.MaxInFlightPerTenant, srv: s, inFlight: map[int64]int{},
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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := tenantFrom(r.Context())
			if ts.max <= 0 || t == nil {
				next.ServeHTTP(w, r)
				return
			}
			if !ts.take(t.ID) {
				ts.refuse(w, r, t, record)
				return
			}
			defer ts.release(t.ID)
			next.ServeHTTP(w, r)
		})
	}
}

// take counts one more request of the tenant, or reports false when its share is taken.
func (ts *tenantShare) take(tenantID int64) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.inFlight[tenantID] >= ts.max {
		return false
	}
	ts.inFlight[tenantID]++
	return true
}

// release ends a request of the tenant; a tenant with none left is forgotten, so the map
// holds only the tenants in flight.
func (ts *tenantShare) release(tenantID int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.inFlight[tenantID]--; ts.inFlight[tenantID] <= 0 {
		delete(ts.inFlight, tenantID)
	}
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
		answer := refusal
		for _, c := range mcptool.ToolCalls(body) {
			// RefuseCall returns refusal itself once it is recorded; anything else says it was not.
			if err := tools.RefuseCall(r.Context(), t.ID, c, refusal); err != refusal {
				answer = err
			}
		}
		return answer
	}
}
