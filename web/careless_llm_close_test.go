package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// timedOut sends one batch chat call with body whose generation the provider bills and
// whose answer times out, the provider's store showing its copy lag after it billed it: the
// operation is unknown.
func (w *lookupWorld) timedOut(t *testing.T, key, body string, lag time.Duration) (*ops.Operation, fake.Generation) {
	t.Helper()
	before := len(w.fake.Generations())
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second, Lag: lag})
	wantProblem(t, w.post(t, "pipeline", key, body), 504, llm.ReasonTimeout)
	op := w.op(t, key)
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s, want unknown", op.Status)
	}
	return op, w.generations(t, before+1)[before]
}

// withApprovals makes every close by hand on w's desk need a second person.
func (w *lookupWorld) withApprovals() {
	every := int64(0)
	w.desk.Approvals, w.desk.Proposals, w.desk.People = ops.ApprovalPolicy{MinCents: &every}, w.db, accountstore.New(w.db)
}

// closeBy posts a close as succeeded with ref on op's page, as c, and returns the page shown
// after it.
func (w *lookupWorld) closeBy(t *testing.T, c *http.Client, op *ops.Operation, ref string) string {
	t.Helper()
	resp := w.dash.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
		"provider_ref": {ref}, "note": {"The provider's console shows it."}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the close answered %d, want the operation's page again", resp.StatusCode)
	}
	_, page := w.dash.page(t, c, "/ops/"+op.ID)
	return page
}

// wantUntouched fails unless op is as it was, with no close, note or proposal recorded.
func (w *lookupWorld) wantUntouched(t *testing.T, op *ops.Operation) {
	t.Helper()
	if cur := w.dash.get(t, op.ID); cur.Status != op.Status || cur.Version != op.Version || cur.ProviderRef != "" {
		t.Fatalf("the refused close left %s v%d with %q (was %s v%d)", cur.Status, cur.Version, cur.ProviderRef, op.Status, op.Version)
	}
	if notes, closes := w.dash.closeRows(t, op.ID); notes != 0 || closes != 0 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want none", notes, closes)
	}
	if n := w.count(t, `SELECT count(*) FROM close_proposals WHERE operation_id = $1`, op.ID); n != 0 {
		t.Fatalf("%d proposals of a refused close, want none", n)
	}
}

// storeUntagged has the fake provider store a completion the way anyone holding the
// provider account's key can, without Settle: with no metadata at all.
func (w *lookupWorld) storeUntagged(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.base+"/chat/completions", strings.NewReader(
		`{"model":"fake-small","store":true,"messages":[{"role":"user","content":"summarise order 12"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-other-app")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK || c.ID == "" {
		t.Fatalf("store a completion: %d %v", resp.StatusCode, err)
	}
	return c.ID
}

// TestACloseByHandWithACompletionTheProviderDoesNotHoldIsRefused: a chat call is unknown
// after its answer timed out, and the provider stores its calls. A careless engineer closes
// it as succeeded with a completion id the provider does not hold (a typo, one made up, one
// from a note) or with one it holds untagged, which no call Settle sent is. Either would
// show the call as succeeded, and tell the client's retry so, on the engineer's word against
// the provider's: the close is refused in a sentence that says what the provider holds and
// to check the id, nothing is written, and where a close needs a second person nothing is
// proposed. The completion the provider holds for the call still closes it, with its answer.
func TestACloseByHandWithACompletionTheProviderDoesNotHoldIsRefused(t *testing.T) {
	t.Parallel()
	for _, approvals := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "needing approval"}[approvals], func(t *testing.T) {
			t.Parallel()
			w := newLookupWorld(t, lookupSetup{})
			if approvals {
				w.withApprovals()
			}
			op, gen := w.timedOut(t, "chat-madeup", chatBody("classify ticket 7731", 0, false), 0)
			c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
			// The call ended long ago: nothing the provider shows later will change its answer.
			w.clock.Advance(time.Hour)
			_, page := w.dash.page(t, c, "/ops/"+op.ID)
			// ops rule 12
			mustContain(t, between(t, page, `data-testid="close-form"`, `</form>`), "where the provider keeps this call, an id it does not hold is refused")

			// ops rule 9
			page = w.closeBy(t, c, op, "chatcmpl-madeup7731")
			w.wantUntouched(t, op)
			mustContain(t, page, "fake-llm holds no stored completion chatcmpl-madeup7731", "check the id (chatcmpl-", "Nothing was changed.")
			mustNotContain(t, page, "try again")

			// ops rule 9
			untagged := w.storeUntagged(t)
			page = w.closeBy(t, c, op, untagged)
			w.wantUntouched(t, op)
			mustContain(t, page, "stored completion "+untagged+" does not name this operation and its tenant", "Nothing was changed.")

			w.closeBy(t, c, op, gen.ID)
			if approvals {
				if n := w.count(t, `SELECT count(*) FROM close_proposals WHERE operation_id = $1 AND provider_ref = $2`, op.ID, gen.ID); n != 1 {
					t.Fatalf("%d proposals of the close with the call's own completion, want 1", n)
				}
				return
			}
			if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != gen.ID || len(cur.Result) == 0 {
				t.Fatalf("the close with the call's own completion left %s with %q and %d bytes of answer", cur.Status, cur.ProviderRef, len(cur.Result))
			}
		})
	}
}

// TestApprovingAProposalOfACompletionTheProviderDoesNotHoldIsRefused: a proposal to close a
// chat call as succeeded names a completion id the provider does not hold; it was made
// before Settle asked the provider about the ids people give. The second person's approval
// asks the provider again and closes nothing, in a sentence that says the provider holds no
// such completion: an approval is no evidence from the provider either (ops rules 9 and 13).
func TestApprovingAProposalOfACompletionTheProviderDoesNotHoldIsRefused(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	w.withApprovals()
	w.dash.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := w.dash.signIn(t, "bob@example.com", desk.RoleOncall)
	op, _ := w.timedOut(t, "chat-proposed", chatBody("classify ticket 7732", 0, false), 0)
	w.clock.Advance(time.Hour)
	older := *w.desk
	older.Completions = nil
	out, err := older.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: "chatcmpl-madeup7732", Note: "The provider's console shows it.", Actor: "alice@example.com",
		ActorID: int64(w.count(t, `SELECT id FROM users WHERE email = 'alice@example.com'`))})
	if err != nil || out.Proposal == nil {
		t.Fatalf("the older proposal: %+v, %v", out, err)
	}
	_, body := w.dash.page(t, bob, "/ops/"+op.ID)
	w.dash.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {shownProposal(body)}})
	// ops rule 9
	if cur := w.dash.get(t, op.ID); cur.Version != op.Version || cur.Status != ops.StatusUnknown {
		t.Fatalf("the approval closed %s with a completion the provider does not hold: %s with %q", op.ID, cur.Status, cur.ProviderRef)
	}
	_, body = w.dash.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "fake-llm holds no stored completion chatcmpl-madeup7732", "check the id")
	if notes, closes := w.dash.closeRows(t, op.ID); notes != 0 || closes != 0 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want none", notes, closes)
	}
}

// TestACloseByHandWithAResponseTheProviderDoesNotHoldIsRefused: a Responses call is unknown
// after its stream broke off. An engineer closes it as succeeded with a response id the
// provider does not hold at all: the close is refused and changes nothing, as for a chat
// completion (ops rule 9).
func TestACloseByHandWithAResponseTheProviderDoesNotHoldIsRefused(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	op, _ := w.failedResponseCall(t, "resp-madeup")
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	w.clock.Advance(time.Hour)
	// ops rule 9
	page := w.closeBy(t, c, op, "resp_madeup7733")
	w.wantUntouched(t, op)
	mustContain(t, page, "fake-llm holds no stored response resp_madeup7733", "check the id (resp_", "Nothing was changed.")
}

// TestACloseByHandRightAfterTheCallSaysTheStoreMayLag: the provider lists a stored
// completion only a little after it billed it. An engineer closes a call that just timed out
// with the id of its completion before the provider shows it: the close is refused, and the
// sentence says the call ended minutes ago, so to try again in a few minutes if the id is
// right, and never that the id is wrong (ops rule 12). A few minutes later the same close
// goes through with the answer.
func TestACloseByHandRightAfterTheCallSaysTheStoreMayLag(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	op, gen := w.timedOut(t, "chat-lagging", chatBody("classify ticket 7734", 0, false), 2*time.Minute)
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	w.clock.Advance(30 * time.Second)
	// ops rule 9
	page := w.closeBy(t, c, op, gen.ID)
	w.wantUntouched(t, op)
	// ops rule 12
	mustContain(t, page, "fake-llm holds no stored completion "+gen.ID, "a little after it billed it", "try again in a few minutes", "Nothing was changed.")

	w.clock.Advance(2 * time.Minute)
	w.closeBy(t, c, op, gen.ID)
	if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != gen.ID || len(cur.Result) == 0 {
		t.Fatalf("the close once the provider shows the completion left %s with %q and %d bytes of answer", cur.Status, cur.ProviderRef, len(cur.Result))
	}
}

// unreachableStore is a provider whose completions are created as usual but whose store
// answers every read with 503, as a provider does while its store is down.
func (w *lookupWorld) unreachableStore(t *testing.T, mode upstream.StoreMode) *upstream.Client {
	t.Helper()
	target := w.fake.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(rw, `{"error":{"message":"The server is overloaded.","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		target.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return w.world.Upstream(srv.URL+"/v1", upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", Store: mode}).(*upstream.Client)
}

// TestACloseByHandWaitsWhileTheProvidersStoreCannotBeAsked: the provider's store cannot be
// read just now, or Settle cannot yet tell whether the provider stores completions at all.
// A close by hand as succeeded is refused for now, in a sentence that says to try again,
// rather than closed on the engineer's word alone (ops rule 9).
func TestACloseByHandWaitsWhileTheProvidersStoreCannotBeAsked(t *testing.T) {
	t.Parallel()
	for _, mode := range []upstream.StoreMode{upstream.StoreOn, upstream.StoreAuto} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			w := newLookupWorld(t, lookupSetup{})
			op, gen := w.timedOut(t, "chat-storedown", chatBody("classify ticket 7735", 0, false), 0)
			c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
			w.desk.Completions = &llm.Lookups{Ledger: w.ledger, Events: w.db, Store: w.unreachableStore(t, mode), Prices: llm.DefaultPrices()}
			// ops rule 9
			page := w.closeBy(t, c, op, gen.ID)
			w.wantUntouched(t, op)
			mustContain(t, page, "fake-llm could not be asked", "try again in a moment", "Nothing was changed.")
		})
	}
}

// TestACloseByHandStandsOnTheWordWhereTheProviderCannotBeAsked: where the provider keeps no
// copy Settle can read (the client sent store: false, or the provider stores no completions),
// nothing can contradict the engineer's id, so the close as succeeded goes through on the
// engineer's word, its evidence says why no answer was fetched, and the client's key answers
// that the answer is not stored (ops rule 12), never that the call failed.
func TestACloseByHandStandsOnTheWordWhereTheProviderCannotBeAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		noStore bool
		body    string
		why     string
	}{
		{"store false", false, `{"model":"fake-small","store":false,"messages":[{"role":"user","content":"classify ticket 7736"}]}`,
			"The client sent store: false"},
		{"no store", true, chatBody("classify ticket 7736", 0, false), "does not store completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newLookupWorld(t, lookupSetup{noStore: tc.noStore})
			op, _ := w.timedOut(t, "chat-unasked", tc.body, 0)
			c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
			page := w.closeBy(t, c, op, "chatcmpl-fromtheinvoice")
			mustContain(t, page, "Closed as succeeded.", "could not fetch its answer")
			cur := w.dash.get(t, op.ID)
			if cur.Status != ops.StatusSucceeded || cur.ProviderRef != "chatcmpl-fromtheinvoice" {
				t.Fatalf("the close on the word left %s with %q", cur.Status, cur.ProviderRef)
			}
			if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'note' AND strpos(summary, $2) > 0`, op.ID, tc.why); n != 1 {
				t.Fatalf("%d note evidence rows saying %q, want 1", n, tc.why)
			}
			// ops rule 12
			wantProblem(t, w.post(t, "pipeline", "chat-unasked", tc.body), http.StatusGone, llm.ReasonAnswerNotStored)
		})
	}
}

// TestACloseByHandWithAResponseNotRecordedOnTheCallStandsOnTheWord: a Responses call sent as
// JSON is unknown after its answer timed out, so no response id was recorded on its attempt,
// while the provider billed and keeps the response. An engineer closes it with that id,
// found in the provider's console: the provider holds it, so it is no made-up id, but
// responses carry no tag of Settle's and nothing ties its text to this call, so the close
// stands on the engineer's word, and the key answers that the answer is not stored (ops rule
// 12) rather than replaying a text that may be another call's.
func TestACloseByHandWithAResponseNotRecordedOnTheCallStandsOnTheWord(t *testing.T) {
	t.Parallel()
	w := newLookupWorld(t, lookupSetup{})
	before := len(w.fake.GenerationsOf(fake.APIResponses))
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	body := `{"model":"fake-small","input":"summarise ticket 7737"}`
	send := func() *http.Response {
		req, err := http.NewRequest(http.MethodPost, w.url+"/v1/responses", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.tokens["pipeline"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "resp-unrecorded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantProblem(t, send(), 504, llm.ReasonTimeout)
	op := w.op(t, "resp-unrecorded")
	gens := w.fake.GenerationsOf(fake.APIResponses)
	if op.Status != ops.StatusUnknown || len(gens) != before+1 {
		t.Fatalf("operation %s with %d responses generated, want unknown with one", op.Status, len(gens)-before)
	}
	c := w.dash.signIn(t, "oncall@example.com", desk.RoleOncall)
	page := w.closeBy(t, c, op, gens[before].ID)
	mustContain(t, page, "Closed as succeeded.", "could not fetch its answer")
	if cur := w.dash.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != gens[before].ID || len(cur.Result) != 0 {
		t.Fatalf("the close left %s with %q and %d bytes of answer; want succeeded on the word, no answer", cur.Status, cur.ProviderRef, len(cur.Result))
	}
	if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'note' AND strpos(summary, $2) > 0`,
		op.ID, "not under an id recorded on this call"); n != 1 {
		t.Fatalf("%d note evidence rows saying why no answer was taken, want 1", n)
	}
	// ops rule 12
	wantProblem(t, send(), http.StatusGone, llm.ReasonAnswerNotStored)
}
