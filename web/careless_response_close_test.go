package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// failedResponseCall sends one streamed Responses call of the pipeline tenant that the
// provider fails part-way: its stream breaks off after the response's first events, so the
// operation is unknown, while the provider keeps the response, under the id recorded on the
// attempt, as failed.
func (w *lookupWorld) failedResponseCall(t *testing.T, key string) (*ops.Operation, fake.Generation) {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultServerError, Chunk: 3, Times: 1})
	req, err := http.NewRequest(http.MethodPost, w.url+"/v1/responses",
		strings.NewReader(`{"model":"fake-small","input":"summarise ticket `+key+`","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens["pipeline"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	op := w.op(t, key)
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if op.Status != ops.StatusUnknown || len(gens) != 1 {
		t.Fatalf("after the broken stream: operation %s, %d responses generated; want unknown and 1", op.Status, len(gens))
	}
	return op, gens[0]
}

// TestACloseByHandWithAResponseTheProviderFailedIsRefused: a Responses call is unknown after
// its stream broke off; the provider holds its response, the one whose id the page shows on
// the attempt, as failed. An engineer pastes that id and closes the call by hand as
// succeeded. The provider's own record says nothing was answered, so showing the call as
// succeeded would stand on the engineer's word against the provider's (ops rule 9), and the
// client's key would then say an answer was produced (ops rule 12): the close is refused in
// a sentence and changes nothing, and where a close needs a second person it is not even
// proposed, since no approval could carry it out (ops rule 13). A lookup then closes the
// call as failed with the provider's record.
func TestACloseByHandWithAResponseTheProviderFailedIsRefused(t *testing.T) {
	t.Parallel()
	for _, approvals := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "needing approval"}[approvals], func(t *testing.T) {
			t.Parallel()
			w := newLookupWorld(t, lookupSetup{})
			if approvals {
				every := int64(0)
				w.desk.Approvals, w.desk.Proposals, w.desk.People = ops.ApprovalPolicy{MinCents: &every}, w.db, accountstore.New(w.db)
			}
			op, failed := w.failedResponseCall(t, "resp-careless")
			c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)

			resp := w.dash.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
				"provider_ref": {failed.ID}, "note": {"The console shows the response."}})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("the close answered %d, want the operation's page again", resp.StatusCode)
			}
			if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
				t.Fatalf("a close by hand with a failed response left the operation %s v%d (was v%d)", cur.Status, cur.Version, op.Version)
			}
			if n := w.count(t, `SELECT count(*) FROM close_proposals WHERE operation_id = $1`, op.ID); n != 0 {
				t.Fatalf("%d proposals of a close with a failed response, want none", n)
			}
			_, page := w.dash.page(t, c, "/ops/"+op.ID)
			mustContain(t, page, failed.ID+" as failed", "Nothing was changed.")

			w.dash.post(t, c, "/ops/"+op.ID+"/lookup", url.Values{})
			if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusFailed || cur.ProviderRef != failed.ID {
				t.Fatalf("the lookup after the refused close left %s with %q", cur.Status, cur.ProviderRef)
			}
		})
	}
}
