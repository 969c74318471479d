package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestAnApprovalAtAnAddressInAnotherSpellingIsThatOperations: the second person types the
// operation's address by hand, its id in upper case with urn:uuid: before it, as the search
// box and the operation's page take it, and approves the proposal shown there. The approval
// is that proposal's: the operation closes once, as proposed (ops rule 13), and the page it
// lands on is the operation's own; not "the request breaks a rule of the ledger".
func TestAnApprovalAtAnAddressInAnotherSpellingIsThatOperations(t *testing.T) {
	t.Parallel()
	one := int64(1)
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: &one}))
	op := e.notSentUnknown(t, "9641")
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
		"provider_ref": {e.heldRefund(t, op, "re_typed")}, "note": {"Stripe shows it."}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the proposal closed it as %s", cur.Status)
	}
	typed := "/ops/urn:uuid:" + strings.ToUpper(op.ID)
	_, body := e.page(t, bob, typed)
	resp := e.post(t, bob, typed+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {shownProposal(body)}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(loc, op.ID) {
		t.Fatalf("the approval at the typed address = %d to %q, want 303 to the operation's page", resp.StatusCode, loc)
	}
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ClosedBy != "alice@example.com" {
		t.Fatalf("after the approval: %s by %q", cur.Status, cur.ClosedBy)
	}
	if _, closes := e.closeRows(t, op.ID); closes != 1 {
		t.Fatalf("%d close audit rows, want 1", closes)
	}
}
