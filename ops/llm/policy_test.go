package llm

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestModesOpenTheirPolicy: a call is opened with its tenant's and route's mode as its
// policy, stored on the operation: a batch call is never resent after an uncertain attempt,
// an interactive one may be, and neither provider takes a key.
func TestModesOpenTheirPolicy(t *testing.T) {
	g, err := New(Config{Ledger: ops.NewLedger(nil, ops.SystemClock{}), Upstream: nameOnly("stub"),
		TenantModes: map[string]Mode{"shop": Batch}})
	if err != nil {
		t.Fatal(err)
	}
	for tenant, retry := range map[string]bool{"shop": false, "other": true} {
		if p := g.policy(g.ModeFor(tenant, "/v1/chat/completions")); p.RetryUncertain != retry || !p.NoProviderKey || p.HasLookup {
			t.Errorf("%s: %+v", tenant, p)
		}
	}
}

// nameOnly is an upstream that is never called.
type nameOnly string

func (n nameOnly) Name() string                     { return string(n) }
func (n nameOnly) Send(context.Context, Call) Reply { return Reply{} }
