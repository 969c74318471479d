package web_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
)

// heldBackgroundCall sends a batch background Responses call whose generation the provider
// holds queued far past every wait: the operation is unknown, its attempt records the
// response's id, and the provider holds the response as queued, with no answer yet.
func (w *lookupWorld) heldBackgroundCall(t *testing.T, key string) (*ops.Operation, string) {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: time.Hour, Times: 1})
	sdk := w.sdk("pipeline")
	r, err := sdk.Responses.New(context.Background(), backgrounded("summarise document "+key), keyed(key), option.WithMaxRetries(0))
	if err != nil || r.Status != "queued" {
		t.Fatalf("created: %v %+v", err, r)
	}
	return w.waitStatus(t, key, ops.StatusUnknown), r.ID
}

// TestACloseByHandWithAResponseStillGeneratingIsRefused: a background Responses call is
// unknown while the provider still holds its response queued, generating. An engineer who
// sees the response in the provider's console closes the call as succeeded with its id. The
// provider's own record says there is no answer yet, and the generation may still fail or be
// cancelled, so the close is refused in a sentence that says the response is still queued,
// to wait for it to end and look the call up then, or cancel it; nothing is written, nothing
// is proposed where a close needs a second person, and a proposal made before Settle asked
// is refused on approval. Once the response is cancelled at the provider, the lookup closes
// the call as failed, as the sentence said.
func TestACloseByHandWithAResponseStillGeneratingIsRefused(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"alone", "needing approval", "approving an earlier proposal"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			w := newLookupWorld(t, lookupSetup{})
			if path != "alone" {
				w.withApprovals()
			}
			op, id := w.heldBackgroundCall(t, "bg-running")
			c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
			var page string
			if path == "approving an earlier proposal" {
				w.dash.signIn(t, "alice@example.com", desk.RoleOncall)
				older := *w.desk
				older.Completions = nil
				out, err := older.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
					ProviderRef: id, Note: "The provider's console shows it.", Actor: "alice@example.com",
					ActorID: int64(w.count(t, `SELECT id FROM users WHERE email = 'alice@example.com'`))})
				if err != nil || out.Proposal == nil {
					t.Fatalf("the older proposal: %+v, %v", out, err)
				}
				_, body := w.dash.page(t, c, "/ops/"+op.ID)
				w.dash.post(t, c, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {shownProposal(body)}})
				_, page = w.dash.page(t, c, "/ops/"+op.ID)
				// ops rule 9
				if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
					t.Fatalf("the approval closed %s with a response still queued: %s with %q", op.ID, cur.Status, cur.ProviderRef)
				}
			} else {
				// ops rule 9
				page = w.closeBy(t, c, op, id)
				w.wantUntouched(t, op)
			}
			// ops rule 12
			mustContain(t, page, "fake-llm holds response "+id+" as queued", "no answer yet", "look the call up", "cancel it", "Nothing was changed.")
			mustNotContain(t, page, "Closed as succeeded", "could not be asked")
			if notes, closes := w.dash.closeRows(t, op.ID); notes != 0 || closes != 0 {
				t.Fatalf("%d note evidence rows and %d close audit rows, want none", notes, closes)
			}

			up := openai.NewClient(option.WithBaseURL(w.base+"/"), option.WithAPIKey("sk-settle-upstream"))
			if r, err := up.Responses.Cancel(context.Background(), id); err != nil || r.Status != "cancelled" {
				t.Fatalf("cancel at the provider: %v", err)
			}
			w.dash.post(t, c, "/ops/"+op.ID+"/lookup", url.Values{})
			// ops rule 12
			if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusFailed {
				t.Fatalf("the lookup once the response was cancelled left %s, want failed", cur.Status)
			}
			if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup' AND provider_ref = $2`, op.ID, id); n != 1 {
				t.Fatalf("%d lookups recorded with the provider's record of the cancelled response, want 1", n)
			}
		})
	}
}
