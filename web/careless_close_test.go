package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// closeRows counts what a close by hand leaves behind for op: note evidence rows and audit
// rows of a close, each of which claims a person's decision.
func (e *dashEnv) closeRows(t *testing.T, opID string) (notes, closes int) {
	t.Helper()
	notes = e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'note'`, opID)
	closes = e.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'close'`, opID)
	return notes, closes
}

// TestACloseFromAPageOlderThanALookupKeepsTheProvidersClose: an on-call engineer opens an
// unknown refund, leaves the tab, and meanwhile a colleague's lookup finds the refund at
// Stripe and closes it. The engineer's close by hand, posted from the old page with a
// mistyped refund id, changes nothing: the provider's record stays, and the engineer is
// told who closed it, as what and that nothing was changed (ops rule 6). Posting the same
// form again minutes later (the back button) says the same and writes nothing either.
func TestACloseFromAPageOlderThanALookupKeepsTheProvidersClose(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	op := e.refundedButUnknown(t, "9601")
	if _, body := e.page(t, alice, "/ops/"+op.ID); !strings.Contains(body, `data-testid="close-form"`) {
		t.Fatal("alice's page offers no close")
	}
	e.post(t, bob, "/ops/"+op.ID+"/lookup", url.Values{})
	looked := e.get(t, op.ID)
	if looked.Status != ops.StatusSucceeded || looked.ProviderRef == "" {
		t.Fatalf("bob's lookup left %s with %q", looked.Status, looked.ProviderRef)
	}
	stale := url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"}, "provider_ref": {"re_typo9601"}, "note": {"Stripe shows it."}}
	for _, wait := range []time.Duration{0, 5 * time.Minute} {
		e.clock.Advance(wait)
		if resp := e.post(t, alice, "/ops/"+op.ID+"/close", stale); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the stale close = %d, want 303 back to the operation", resp.StatusCode)
		}
		if cur := e.get(t, op.ID); cur.Version != looked.Version || cur.ProviderRef != looked.ProviderRef || cur.ClosedBy != looked.ClosedBy {
			t.Fatalf("the stale close changed the operation: %s v%d %q by %q", cur.Status, cur.Version, cur.ProviderRef, cur.ClosedBy)
		}
		_, body := e.page(t, alice, "/ops/"+op.ID)
		mustContain(t, body, "Already closed by "+looked.ClosedBy+" (as succeeded", "Nothing was changed.")
	}
	if notes, closes := e.closeRows(t, op.ID); notes != 0 || closes != 1 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want 0 and 1 (the lookup's)", notes, closes)
	}
}

// TestADoubleClickedCloseClosesOnce: the close button pressed twice sends the same form
// twice at once. One close is made, with one note and one audit row; the other request is
// answered with who closed it, never an error page (ops rule 6).
func TestADoubleClickedCloseClosesOnce(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9602")
	form := url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"}, "provider_ref": {e.heldRefund(t, op, "re_9602byhand")}, "note": {"Stripe shows it."}}
	codes := postAtOnce(t, e, []*http.Client{alice, alice}, "/ops/"+op.ID+"/close", []url.Values{form, form})
	for _, c := range codes {
		if c != http.StatusSeeOther {
			t.Fatalf("the two clicks were answered %v, want 303 each", codes)
		}
	}
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.Version != op.Version+1 {
		t.Fatalf("after the double click: %s v%d", cur.Status, cur.Version)
	}
	if notes, closes := e.closeRows(t, op.ID); notes != 1 || closes != 1 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want 1 each", notes, closes)
	}
}

// TestTwoPeopleClosingOppositeWaysAtOnceCloseOnce: two engineers close one LLM call at the
// same moment, one as failed, the other as succeeded. Exactly one close lands; the other is
// told who closed it and as what, and nothing of theirs is recorded (ops rule 6).
func TestTwoPeopleClosingOppositeWaysAtOnceCloseOnce(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	for i := 0; i < 3; i++ {
		op := e.llmUnknown(t, "chat-opposite-"+itoa(int64(i)))
		forms := []url.Values{
			{"version": {itoa(op.Version)}, "to": {"failed"}, "note": {"The provider's console shows no request."}},
			{"version": {itoa(op.Version)}, "to": {"succeeded"}, "provider_ref": {"chatcmpl-opp" + itoa(int64(i))}, "note": {"The console shows it."}},
		}
		postAtOnce(t, e, []*http.Client{alice, bob}, "/ops/"+op.ID+"/close", forms)
		cur := e.get(t, op.ID)
		if !cur.Status.Final() || cur.Version != op.Version+1 {
			t.Fatalf("after both closes: %s v%d, want one close", cur.Status, cur.Version)
		}
		if notes, closes := e.closeRows(t, op.ID); notes != 1 || closes != 1 {
			t.Fatalf("%d note evidence rows and %d close audit rows, want 1 each", notes, closes)
		}
		loser := alice
		if cur.ClosedBy == "alice@example.com" {
			loser = bob
		}
		_, body := e.page(t, loser, "/ops/"+op.ID)
		mustContain(t, body, "Already closed by "+cur.ClosedBy+" (as "+string(cur.Status), "Nothing was changed.")
	}
}

// postAtOnce posts forms[i] as clients[i], all released together, and returns the status
// of each answer.
func postAtOnce(t *testing.T, e *dashEnv, clients []*http.Client, path string, forms []url.Values) []int {
	t.Helper()
	codes := make([]int, len(clients))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			resp, err := clients[i].PostForm(e.url+path, forms[i])
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}(i)
	}
	close(start)
	wg.Wait()
	return codes
}
