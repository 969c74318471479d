package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestATickedSelectionThatChangedIsLookedUpOnce: an engineer ticks two rows of a queue page
// that is minutes old, while a colleague's lookup has closed one of them. Looking the
// selection up closes the other once and counts the first as already closed, leaving its
// close as it was; sending the same form again (the back button) finds both closed and
// closes nothing twice.
func TestATickedSelectionThatChangedIsLookedUpOnce(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	first, second := e.refundedButUnknown(t, "9621"), e.refundedButUnknown(t, "9622")
	e.post(t, bob, "/ops/"+first.ID+"/lookup", url.Values{})
	closed := e.get(t, first.ID)
	if closed.Status != ops.StatusSucceeded {
		t.Fatalf("bob's lookup left %s", closed.Status)
	}
	form := url.Values{"scope": {"selected"}, "ids": {first.ID, second.ID}}
	for i, want := range []struct{ closed, already string }{{"1", "1"}, {"0", "2"}} {
		resp, err := alice.PostForm(e.url+"/ops/lookup", form)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("lookup %d of the selection = %d", i+1, resp.StatusCode)
		}
		mustContain(t, body, `data-testid="bulk-closed">`+want.closed+`<`, `data-testid="bulk-already">`+want.already+`<`)
	}
	if cur := e.get(t, first.ID); cur.Version != closed.Version || cur.ClosedBy != closed.ClosedBy {
		t.Fatalf("the selection changed %s, closed by %s: v%d by %s", first.ID, closed.ClosedBy, cur.Version, cur.ClosedBy)
	}
	if cur := e.get(t, second.ID); cur.Status != ops.StatusSucceeded || cur.ClosedBy != "alice@example.com" {
		t.Fatalf("the selection left %s as %s by %q", second.ID, cur.Status, cur.ClosedBy)
	}
	if _, closes := e.closeRows(t, second.ID); closes != 1 {
		t.Fatalf("%d close audit rows of %s, want 1", closes, second.ID)
	}
}

// TestAQueueLinkPastItsEndOrDamagedSaysSo: a queue page link kept from yesterday whose
// cursor is past every row shows an empty page, not an error; a damaged one, or one naming
// a tenant that does not exist, is refused in a sentence.
func TestAQueueLinkPastItsEndOrDamagedSaysSo(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	e.notSentUnknown(t, "9623")
	if code, _ := e.page(t, alice, "/ops?after_created=2000-01-01T00:00:00Z&after_id=00000000-0000-7000-8000-000000000000"); code != http.StatusOK {
		t.Fatalf("a page past the end = %d, want 200", code)
	}
	for path, says := range map[string]string{
		"/ops?after_created=yesterday&after_id=x": "The page link is damaged",
		"/ops?tenant=no-such-tenant":              "There is no tenant",
	} {
		code, body := e.page(t, alice, path)
		if code != http.StatusUnprocessableEntity {
			t.Errorf("GET %s = %d, want 422", path, code)
		}
		mustContain(t, body, says)
	}
}

// TestASelectionNamingOneOperationTwiceLooksItUpOnce: a selection posted with one operation
// under two spellings of its id (a person's paste beside the ticked row, upper case, or
// urn:uuid:) is one operation: it is looked up once and counted once, closed, never also
// "already closed" by its own second lookup, and the summary says no more than that one
// operation was handled (ops rule 12).
func TestASelectionNamingOneOperationTwiceLooksItUpOnce(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	op := e.refundedButUnknown(t, "9631")
	form := url.Values{"scope": {"selected"}, "ids": {op.ID, strings.ToUpper(op.ID), "urn:uuid:" + op.ID}}
	resp, err := alice.PostForm(e.url+"/ops/lookup", form)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lookup of the selection = %d", resp.StatusCode)
	}
	mustContain(t, body, `data-testid="bulk-closed">1<`, `data-testid="bulk-already">0<`, `data-testid="bulk-need-person">0<`)
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'lookup'`, op.ID); n > 1 {
		t.Fatalf("%d lookups recorded of the one operation selected, want 1", n)
	}
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded {
		t.Fatalf("the selection left %s as %s", op.ID, cur.Status)
	}
}
