package llm_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestLLMLookupPathsTakeOnlyTaggedCompletions: the provider billed a call whose answer timed
// out and whose stored copy never shows, and its store holds completions that claim the
// operation without naming its tenant, or with another tenant, and one with no metadata at
// all (anyone with the provider account's key can make them). The desk's lookup finds
// nothing, the reconciler leaves the operation unknown, and a person who closes it with the
// untagged completion's id is refused: Settle tags every call it sends while the provider
// stores completions, so nothing ties that completion to this call, and the client's key
// still says the outcome is unknown rather than that it succeeded (ops rules 9 and 12).
func TestLLMLookupPathsTakeOnlyTaggedCompletions(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, reconciled: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	ctx := context.Background()
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second, Lag: 365 * 24 * time.Hour})
	r, err := w.call("pipeline", "doc-20", chatBody("classify document 20", 0, false))
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	op := w.op(t, "doc-20")
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s, want unknown", op.Status)
	}
	direct := oai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
	store := func(meta shared.Metadata) string {
		t.Helper()
		c, err := direct.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: "fake-small", Store: oai.Bool(true),
			Metadata: meta, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("classify document 20")}})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	store(shared.Metadata{llm.MetaOperation: op.ID})
	store(shared.Metadata{llm.MetaOperation: op.ID, llm.MetaTenant: strconv.FormatInt(op.TenantID+1000, 10)})
	bare := store(nil)
	w.clock.Advance(time.Second)

	out, err := d.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupNotFound || len(out.Records) != 0 {
		t.Fatalf("the desk's lookup: %s %q, %d records, %v; want not found", out.Outcome, out.Message, len(out.Records), err)
	}

	rc := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&openai.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(w.base, "/v1"),
			APIKey: "sk-settle-upstream", Lookups: w.lookups}}}
	w.clock.Advance(recon.LookupGrace + time.Second)
	reps, err := rc.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].Looked != 1 || reps[0].Closed != 0 {
		t.Fatalf("the reconciler: %+v, %v; want one operation looked up and none closed", reps, err)
	}
	if got := w.op(t, "doc-20"); got.Status != ops.StatusUnknown {
		t.Fatalf("after the reconciler the operation is %s, want unknown", got.Status)
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, op.ID); n != 0 {
		t.Fatalf("%d completions not tied to the operation were recorded as its charges", n)
	}

	cur := w.op(t, "doc-20")
	// ops rule 9
	_, err = d.CloseManually(ctx, desk.ManualClose{ID: cur.ID, Version: cur.Version, To: ops.StatusSucceeded,
		ProviderRef: bare, Note: "The provider's logs show it.", Actor: "oncall@example.com"})
	if ops.ErrorCode(err) != ops.EINVALID || !strings.Contains(ops.ErrorMessage(err), "does not name this operation and its tenant") {
		t.Fatalf("a person's close with an untagged completion: %v; want it refused", err)
	}
	if got := w.op(t, "doc-20"); got.Status != ops.StatusUnknown || got.Version != cur.Version {
		t.Fatalf("the refused close left the operation %s v%d (was v%d)", got.Status, got.Version, cur.Version)
	}
	r, err = w.call("pipeline", "doc-20", chatBody("classify document 20", 0, false))
	wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown)
}
