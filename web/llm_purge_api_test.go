package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// TestPurgedCallsPageAndQueueRowKeepTheirAPIAndModel: the purge deletes an LLM call's request
// a week or so after its key's TTL, but its queue row and its page still name the API it
// called and the model it asked for, as they did before: a person closing an old unknown call
// must know which of the provider's records to look for.
func TestPurgedCallsPageAndQueueRowKeepTheirAPIAndModel(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	ctx := context.Background()
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: e.tenant.ID, Kind: ops.KindLLMCall, Provider: "openai",
		IntentKey: "idem-purged", ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", ChatRef: "chat-purged",
		Request: []byte(`{"policy":"interactive","route":"/v1/responses","stream":true,"body":{"model":"gpt-4.1-mini","input":"hi"}}`)}
	o, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: e.clock.Now(), Claim: "gw", LeaseUntil: e.clock.Now().Add(time.Second),
		Actor: "test", API: "responses"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Transition(ctx, ops.TransitionParams{ID: o.Op.ID, Version: o.Op.Version, From: ops.StatusInProgress,
		To: ops.StatusUnknown, Now: e.clock.Now(), Actor: "gw", Action: "mark_unknown", Reason: "stream broke off"}); err != nil {
		t.Fatal(err)
	}
	rep, err := (&llm.Purger{Store: purgestore.New(e.db), Clock: ops.NewManualClock(e.clock.Now().Add(llm.DefaultBodyKeep + time.Hour)),
		Keep: llm.DefaultBodyKeep, JobTTL: 24 * time.Hour, Batch: 10}).RunOnce(ctx)
	if err != nil || rep.Operations != 1 {
		t.Fatalf("purge: %+v %v, want the call purged", rep, err)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	code, body := e.page(t, c, "/ops?status=unknown")
	if code != 200 {
		t.Fatalf("queue = %d", code)
	}
	row := between(t, body, `data-id="`+op.ID+`"`, `</tr>`)
	mustContain(t, row, `data-testid="queue-api">responses<`, `data-testid="queue-model">gpt-4.1-mini<`)

	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-testid="op-api">responses<`, `data-testid="op-model">gpt-4.1-mini<`)
}
