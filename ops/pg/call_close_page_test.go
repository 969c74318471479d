package pg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestACallsCloseStaysOnItsOperationsPage: an operation's close is never heap-only (status
// is indexed), but a new row version written on the old one's page costs the WAL only the
// bytes that changed, and no lock record; one that must move to another page is logged
// whole, after a lock record on the old version. An LLM call's row about doubles at its
// close (its answer, and a stream's events), so pages of operations filled to the brim at
// the openings sent every close elsewhere: this opens calls until their first page is
// full, then closes a plain and a streamed one, which must stay where they were opened
// (migration 00078).
func TestACallsCloseStaysOnItsOperationsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	block := func(id string) int {
		t.Helper()
		return f.count(t, `SELECT (ctid::text::point)[0]::int FROM operations WHERE id = $1`, id)
	}
	var calls []ops.Admission
	for i := 0; len(calls) < 3 || block(calls[len(calls)-1].Op.ID) == block(calls[0].Op.ID); i++ {
		c, err := f.seed().Open(ctx, ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai",
			IntentKey: fmt.Sprintf("page-%d", i), Fingerprint: "fp-page", Retention: 24 * time.Hour,
			Request: []byte(`{"body":{"model":"fake-small","stream":true,"messages":[{"role":"user","content":"What is the capital of France? Answer in one short sentence."}]}}`)}, "r", "gw")
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	body := []byte(`{"id":"chatcmpl-page","object":"chat.completion","created":1765000000,"model":"fake-small","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France, and has been for a long time now."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`)
	var evs []string
	for k := range 20 {
		evs = append(evs, fmt.Sprintf(`{"id":"chatcmpl-page","object":"chat.completion.chunk","created":1765000000,"model":"fake-small","choices":[{"index":0,"delta":{"content":"word%d "},"finish_reason":null}]}`, k))
	}
	events := []byte(`{"attempt":1,"events":[` + strings.Join(evs, ",") + `]}`)
	for i, ev := range [][]byte{nil, events} {
		c := calls[i]
		was := block(c.Op.ID)
		if _, err := f.seed().Finish(ctx, c.Op, c.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: fmt.Sprintf("chatcmpl-page-%d", i), Body: body, Events: ev}}); err != nil {
			t.Fatal(err)
		}
		if now := block(c.Op.ID); now != was {
			t.Errorf("a call's close (streamed: %v) moved its row from page %d to page %d", ev != nil, was, now)
		}
	}
}
