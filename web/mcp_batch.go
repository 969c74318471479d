package web

import (
	"fmt"
	"net/http"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
)

// mcpMaxBatchCalls is the most tool calls one JSON-RPC batch may hold. The SDK runs a
// batch's calls at once, while the server's cap and the tenant's share count the HTTP
// request that carried them: without a bound, one request within the body limit could put
// thousands of refunds in flight.
const mcpMaxBatchCalls = 32

// reasonBatchTooLarge is the reason a batch over mcpMaxBatchCalls is refused with.
const reasonBatchTooLarge = "batch_too_large"

// mcpBatchPlaces holds, for a message of more than one tool call, a place in the tenant's
// share for each call beyond the first (the share's own check took the first), so a batch
// counts as the requests it makes. A batch over mcpMaxBatchCalls, or one whose calls the
// share has no places left for, is refused whole before any call runs, each call recorded
// as its tenant's refused request (ops rule 8); ok is false then. release frees the places.
func (s *Server) mcpBatchPlaces(w http.ResponseWriter, r *http.Request, tools *mcptool.Tools, calls []mcptool.ToolCall) (release func(), ok bool) {
	release = func() {}
	if len(calls) <= 1 {
		return release, true
	}
	if len(calls) > mcpMaxBatchCalls {
		s.refuseMCPCalls(w, r, tools, calls, &ops.Error{Code: ops.EINVALID, Reason: reasonBatchTooLarge, Message: fmt.Sprintf(
			"A batch holds at most %d tool calls; this one holds %d. Send them in smaller batches or one at a time.", mcpMaxBatchCalls, len(calls))})
		return release, false
	}
	t := tenantFrom(r.Context())
	if s.share.max <= 0 || t == nil {
		return release, true
	}
	slots := make([]*shareSlot, 0, len(calls)-1)
	release = func() {
		for _, sl := range slots {
			sl.release()
		}
	}
	for range len(calls) - 1 {
		sl := s.share.take(t.ID, lendNone)
		if sl == nil {
			release()
			s.share.refuse(w, r, t, func(r *http.Request, _ *ops.Tenant, refusal error) error {
				return recordMCPCalls(r, tools, calls, refusal)
			})
			return func() {}, false
		}
		slots = append(slots, sl)
	}
	return release, true
}

// refuseMCPCalls answers a whole MCP request with one JSON-RPC error, once each tool call
// it holds is recorded as refused: the error of refusal, or of the outage that kept a call
// from being recorded, with its status.
func (s *Server) refuseMCPCalls(w http.ResponseWriter, r *http.Request, tools *mcptool.Tools, calls []mcptool.ToolCall, refusal error) {
	answer := recordMCPCalls(r, tools, calls, refusal)
	status, _ := statusOf(answer)
	writeRPCError(w, status, onlyID(calls), mcptool.RefusalText(answer))
}

// recordMCPCalls records each call as refused by refusal and returns what the request is
// answered: refusal once all are recorded, else the outage that kept one from it.
func recordMCPCalls(r *http.Request, tools *mcptool.Tools, calls []mcptool.ToolCall, refusal error) error {
	answer := refusal
	for _, c := range calls {
		// RefuseCall returns refusal itself once it is recorded; anything else says it was not.
		if err := tools.RefuseCall(r.Context(), tenantFrom(r.Context()).ID, c, refusal); err != refusal {
			answer = err
		}
	}
	return answer
}
