package llm

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestPolicyOfReadsTheCallsOwnPolicy: the reaper and every other process read an LLM
// call's policy from what the call stored when it was opened, not from the defaults.
func TestPolicyOfReadsTheCallsOwnPolicy(t *testing.T) {
	g, err := New(Config{Ledger: ops.NewLedger(nil, ops.SystemClock{}), Upstream: nameOnly("stub")})
	if err != nil {
		t.Fatal(err)
	}
	for mode, retry := range map[Mode]bool{Batch: false, Interactive: true} {
		op := &ops.Operation{Kind: ops.KindLLMCall, Request: storedRequest(stored{Mode: mode, Route: "/v1/chat/completions"}, []byte(`{}`))}
		if p := g.PolicyOf(op); p.RetryUncertain != retry || !p.NoProviderKey {
			t.Errorf("%s: %+v", mode, p)
		}
	}
	if p := g.PolicyOf(&ops.Operation{Kind: ops.KindLLMCall, Request: []byte(`not json`)}); !p.RetryUncertain {
		t.Errorf("an unreadable request falls back to the gateway's default: %+v", p)
	}
}

// nameOnly is an upstream that is never called.
type nameOnly string

func (n nameOnly) Name() string                     { return string(n) }
func (n nameOnly) Send(context.Context, Call) Reply { return Reply{} }
