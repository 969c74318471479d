package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// llmCallOn is an llm_call of route with model, left unknown after its stream broke off with
// costMicros recorded for what had arrived.
func (e *dashEnv) llmCallOn(t *testing.T, route, model string, costMicros int64) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: e.tenant.ID, Kind: ops.KindLLMCall, Provider: "openai",
		IntentKey: "idem-" + route, ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", ChatRef: "chat-" + route,
		Request: []byte(`{"policy":"interactive","route":"` + route + `","stream":true,"body":{"model":"` + model + `","input":"hi"}}`)}
	o, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: e.clock.Now(), Claim: "gw", LeaseUntil: e.clock.Now().Add(time.Second), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.db.Transition(ctx, ops.TransitionParams{ID: o.Op.ID, Version: o.Op.Version, From: ops.StatusInProgress,
		To: ops.StatusUnknown, Now: e.clock.Now(), Actor: "gw", Action: "mark_unknown", Reason: "stream broke off"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `UPDATE operations SET cost_micros = $2 WHERE id = $1`, out.ID, costMicros); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQueueAndOpPageNameTheAPIModelAndCost lists LLM calls of two APIs in the unknown queue:
// each row names its API and model and shows the cost the operation recorded where a refund
// shows its amount, and the operation's page says the same. A call that recorded no cost
// says so instead of a zero nobody knows (ops rule 12).
func TestQueueAndOpPageNameTheAPIModelAndCost(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	resp := e.llmCallOn(t, "/v1/responses", "gpt-4.1-mini", 1234)
	chat := e.llmCallOn(t, "/v1/chat/completions", "gpt-4o-mini", 0)
	refund := e.notSentUnknown(t, "order-api")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	code, body := e.page(t, c, "/ops?status=unknown")
	if code != 200 {
		t.Fatalf("queue = %d", code)
	}
	for _, want := range []struct{ id, api, model, amount string }{
		{resp.ID, "responses", "gpt-4.1-mini", "0.001234 USD"},
		{chat.ID, "chat completions", "gpt-4o-mini", "none recorded"},
	} {
		row := between(t, body, `data-id="`+want.id+`"`, `</tr>`)
		mustContain(t, row, `data-testid="queue-api">`+want.api+`<`, `data-testid="queue-model">`+want.model+`<`,
			`data-testid="queue-amount">`+want.amount+`<`)
	}
	row := between(t, body, `data-id="`+refund.ID+`"`, `</tr>`)
	mustContain(t, row, `data-testid="queue-amount">12.00 USD<`)
	mustNotContain(t, row, `queue-api`, `queue-model`)

	_, body = e.page(t, c, "/ops/"+resp.ID)
	mustContain(t, body, `data-testid="op-api">responses<`, `data-testid="op-model">gpt-4.1-mini<`, `data-testid="op-cost">0.001234 USD<`)
}

// between is the part of body from the first from up to the next to after it.
func between(t *testing.T, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("page lacks %q", from)
	}
	j := strings.Index(body[i:], to)
	if j < 0 {
		t.Fatalf("page lacks %q after %q", to, from)
	}
	return body[i : i+j]
}

func mustNotContain(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if strings.Contains(body, w) {
			t.Errorf("page has %q", w)
		}
	}
}
