package llm

import (
	"cmp"
	"slices"

	"github.com/settle-dev/settle/ops"
)

// The callers a budget refusal is counted under: the gateway's APIs, or a pipeline job's
// worker.
const (
	CallerGateway = "gateway"
	CallerJob     = "job"
)

// BudgetRefusal counts the calls of one tenant refused by its LLM budget of the day, by
// Reason: spent (ReasonBudgetSpent), what is left too small for the call's worst case
// (ReasonBudgetTooSmall), which stops a tenant whose calls all ask more than is left as
// surely, or a job's generation over the whole budget of a day (ReasonOverWholeBudget),
// refused at submission or failed by its worker, which stops that job for good. It counts
// by the API the call would have called (as a label:
// "chat_completions", "messages") and by Caller (CallerGateway or CallerJob). N counts
// refusal decisions since the process started: one per client request refused, and one per
// job the worker held back until the budget resets, however often the workers poll while it
// waits.
type BudgetRefusal struct {
	TenantID int64
	Reason   string
	API      string
	Caller   string
	N        uint64
}

// refusalKey names one counter of Budgets' refusals.
type refusalKey struct {
	tenantID            int64
	reason, api, caller string
}

// Refused counts one call of the tenant refused by its budget for reason; a refusal of any
// other reason counts nothing: a model the table does not price refuses the call, not the
// tenant's budget, and a call held back for seconds by the calls in flight
// (ReasonBudgetHeld) is a burst on a budget that pays for each call, not a stop. The gateway
// counts its own; a job's worker, which decides to hold its job back or fail it, calls it
// once per decision, and the jobs service once per submission it refuses. Tenants are only
// those whose budget check ran, so the counts take no more keys than there are tenants with
// budgets, times reasons, APIs and callers.
func (b *Budgets) Refused(tenantID int64, reason, api, caller string) {
	if b == nil || (reason != ReasonBudgetSpent && reason != ReasonBudgetTooSmall && reason != ReasonOverWholeBudget) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refusals == nil {
		b.refusals = map[refusalKey]uint64{}
	}
	b.refusals[refusalKey{tenantID, reason, api, caller}]++
}

// Refusals returns every count of refused calls, ordered by tenant, reason, API and caller.
func (b *Budgets) Refusals() []BudgetRefusal {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	out := make([]BudgetRefusal, 0, len(b.refusals))
	for k, n := range b.refusals {
		out = append(out, BudgetRefusal{TenantID: k.tenantID, Reason: k.reason, API: k.api, Caller: k.caller, N: n})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y BudgetRefusal) int {
		return cmp.Or(cmp.Compare(x.TenantID, y.TenantID), cmp.Compare(x.Reason, y.Reason), cmp.Compare(x.API, y.API),
			cmp.Compare(x.Caller, y.Caller))
	})
	return out
}

// BudgetRefusals is Budgets.Refusals of the gateway's budgets: none without budgets.
func (g *Gateway) BudgetRefusals() []BudgetRefusal { return g.cfg.Budgets.Refusals() }

// apiLabel is the label of the exchange's API ("chat_completions"), as the ledger's counters
// split by API.
func (x *exchange) apiLabel() string {
	return ops.Call{API: APIName(x.api.route())}.Label()
}
