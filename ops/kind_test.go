package ops_test

import (
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestRegisterKeepsOneSpecPerKind: a ledger answers each kind with the spec registered for
// it, in the order registered; a kind registered twice or without a name is a wiring mistake
// that panics; an unregistered kind gets a spec that offers nothing and whose customer
// sentence claims no outcome (ops rule 12).
func TestRegisterKeepsOneSpecPerKind(t *testing.T) {
	l := ops.NewLedger(nil, ops.SystemClock{})
	l.Register(ops.KindSpec{Kind: ops.KindLLMJob, Name: "job"}, ops.KindSpec{Kind: ops.KindRefund, Name: "refund", NotExecuted: true})
	if got := l.Kinds(); len(got) != 2 || got[0].Kind != ops.KindLLMJob || got[1].Kind != ops.KindRefund {
		t.Fatalf("kinds %+v", got)
	}
	if s := l.Kind(ops.KindRefund); s.Name != "refund" || !s.NotExecuted {
		t.Fatalf("refund spec %+v", s)
	}
	s := l.Kind(ops.KindLLMCall)
	c := s.CustomerStatus(&ops.Operation{Kind: ops.KindLLMCall, Status: ops.StatusSucceeded}, nil)
	if s.Name != "llm_call" || s.Lookup != ops.LookupNone || s.NotExecuted || s.Generation || c.Known {
		t.Fatalf("unregistered spec %+v says %+v", s, c)
	}
	for name, spec := range map[string]ops.KindSpec{
		"twice":   {Kind: ops.KindRefund, Name: "again"},
		"no name": {Kind: ops.KindLLMCall},
		"unknown": {Kind: "fax", Name: "fax"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered without a panic", name)
				}
			}()
			l.Register(spec)
		}()
	}
}
