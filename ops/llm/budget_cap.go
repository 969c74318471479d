package llm

import (
	"encoding/json"

	"github.com/settle-dev/settle/ops"
)

// fitCheck holds a new call of a tenant with a budget to what sp leaves of it, less what
// its calls in flight hold: the call's worst case (its body's bytes as input tokens, its
// output cap's tokens as output, at its model's prices) must fit. A call that names no cap
// where Settle may name one is sent with the largest cap that fits (x.outputCap), so the
// provider cannot bill past the budget; one that does not fit, or whose input alone does
// not, is refused (ReasonBudgetTooSmall) and nothing of it is sent (ops rule 12). It
// answers the worst case to hold while the call runs: with the cap Settle set, that cap's.
func (x *exchange) fitCheck(sp spendNow) (int64, error) {
	rule := x.api.capRule()
	s, field, err := rule.size(x.req, x.body)
	if err != nil {
		return 0, err
	}
	f, err := x.g.cfg.Budgets.fitNew(s, sp, capName{field: field}, rule.min, rule.set != "")
	if err != nil {
		return 0, err
	}
	x.outputCap = f.setCap
	return f.hold, nil
}

// capOf is the output cap Settle set on op's request, which every attempt of op sends: the
// one this request's check set when it opened op (an operation opened comes back without
// the request it stores), else the one op stores; 0 for none.
func (x *exchange) capOf(op *ops.Operation) int64 {
	if len(op.Request) == 0 {
		return x.outputCap
	}
	var s struct {
		OutputCap int64 `json:"output_cap"`
	}
	_ = json.Unmarshal(op.Request, &s)
	return s.OutputCap
}

// withCap is body, as it goes to the provider for op, with the output cap Settle set on op,
// which the transport is told of (Request.OutputCap); body itself when op has none.
func (x *exchange) withCap(op *ops.Operation, body []byte) []byte {
	n := x.capOf(op)
	rule := x.api.capRule()
	if n <= 0 || rule.set == "" {
		return body
	}
	if x.onCap != nil {
		x.onCap(n)
	}
	return withOutputCap(x.req, body, rule.set, n)
}
