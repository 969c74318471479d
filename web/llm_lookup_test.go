package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
)

// TestLLMUnknownSaysOnlyWhatWillHappen: the 409 of an unknown outcome promises the
// reconciler's lookup only when the provider stores completions and a reconciler runs; a
// provider that refuses store gets plain calls, and both the 409 and the lookup say a
// person must settle it by hand.
func TestLLMUnknownSaysOnlyWhatWillHappen(t *testing.T) {
	t.Parallel()
	t.Run("stored and reconciled", func(t *testing.T) {
		t.Parallel()
		w := newLookupWorld(t, lookupSetup{reconciled: true})
		w.billedThenTimedOut(t, "doc-5", "classify document 5")
		p := wantProblem(t, w.post(t, "pipeline", "doc-5", chatBody("classify document 5", 0, false)), http.StatusConflict, llm.ReasonOutcomeUnknown)
		if !strings.Contains(p.Detail, "the reconciler looks this one up") {
			t.Fatalf("the 409 says %q", p.Detail)
		}
	})
	t.Run("provider without stored completions", func(t *testing.T) {
		t.Parallel()
		w := newLookupWorld(t, lookupSetup{noStore: true, reconciled: true})
		op, gen := w.billedThenTimedOut(t, "doc-6", "classify document 6")
		if gen.Stored {
			t.Fatal("a provider that refuses store was asked to store")
		}
		p := wantProblem(t, w.post(t, "pipeline", "doc-6", chatBody("classify document 6", 0, false)), http.StatusConflict, llm.ReasonOutcomeUnknown)
		if strings.Contains(p.Detail, "looks") || !strings.Contains(p.Detail, "by hand") {
			t.Fatalf("the 409 says %q", p.Detail)
		}
		out, err := w.desk.Lookup(context.Background(), op.ID, "oncall@example.com")
		if err != nil || out.Outcome != desk.LookupUnsupported || !strings.Contains(out.Message, "does not store completions") {
			t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
		}
		c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
		_, page := w.dash.page(t, c, "/ops/"+op.ID)
		mustContain(t, page, `data-testid="lookup-note"`, "does not store completions")
		if strings.Contains(page, `data-testid="lookup-button"`) {
			t.Fatal("the page offers a lookup the provider cannot answer")
		}
	})
}

// TestOpPageTellsWhatEachKeyProtects: an llm_call's page never calls a resend safe nor
// says the provider keeps keys (it takes none); it says how long Settle replays the
// client's key, and its close form asks for a completion id. A job's page names its dedup
// key, and a refund's still counts down Stripe's retention.
func TestOpPageTellsWhatEachKeyProtects(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	call, _ := w.billedThenTimedOut(t, "doc-9", "classify document 9")
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	_, page := w.dash.page(t, c, "/ops/"+call.ID)
	mustContain(t, page, "fake-llm takes no idempotency key", "may be billed twice", "Settle replays the client's key until",
		`placeholder="chatcmpl-..."`, "Completion id", `data-testid="lookup-button"`)
	for _, wrong := range []string{"keeps keys for", "is safe until", "re_..."} {
		if strings.Contains(page, wrong) {
			t.Fatalf("the llm_call page says %q", wrong)
		}
	}

	ctx := context.Background()
	job := &ops.Operation{ID: ops.NewOperationID(), TenantID: call.TenantID, Kind: ops.KindLLMJob, Provider: "fake-llm",
		IntentKey: "job:dedup-1", ProviderKey: ops.NewProviderKey(), Fingerprint: "dedup-1"}
	if _, err := w.db.Open(ctx, ops.OpenParams{Op: job, Now: w.clock.Now(), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	_, page = w.dash.page(t, c, "/ops/"+job.ID)
	mustContain(t, page, "fake-llm takes no idempotency key", "dedup key", `placeholder="chatcmpl-..."`)
	if strings.Contains(page, "keeps keys for") || strings.Contains(page, "keys for none") {
		t.Fatal("the llm_job page claims the provider keeps keys")
	}

	refund := &ops.Operation{ID: ops.NewOperationID(), TenantID: call.TenantID, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: "order-1", ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", OrderRef: "1", AmountCents: 100, Currency: "usd",
		Retention: 24 * time.Hour}
	if _, err := w.db.Open(ctx, ops.OpenParams{Op: refund, Now: w.clock.Now(), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	_, page = w.dash.page(t, c, "/ops/"+refund.ID)
	mustContain(t, page, "stripe keeps idempotency keys for 1d 0h", `placeholder="re_..."`)
}

// TestLLMBulkLookupClosesCalls: "Look up at provider" on everything matching the
// Unknown queue closes the LLM calls whose completions the provider stored.
func TestLLMBulkLookupClosesCalls(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	a, _ := w.billedThenTimedOut(t, "doc-11", "classify document 11")
	b, _ := w.billedThenTimedOut(t, "doc-12", "classify document 12")
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	resp, err := c.PostForm(w.url+"/ops/lookup", map[string][]string{"scope": {"filter"}, "tab": {"unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := w.dash.runBulk(t, 20); n != 1 {
		t.Fatalf("%d bulk lookups ran, want 1", n)
	}
	_, page := w.dash.page(t, c, bulkLocation(t, resp))
	mustContain(t, page, `data-testid="bulk-closed">2<`, `data-testid="bulk-need-person">0<`, `data-state="done"`)
	for _, op := range []*ops.Operation{a, b} {
		if got := w.dash.get(t, op.ID); got.Status != ops.StatusSucceeded || len(got.Result) == 0 {
			t.Fatalf("operation %s is %s after the bulk lookup", op.ID, got.Status)
		}
	}
}
