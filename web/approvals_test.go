package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestDashboardProposesCloseAboveThreshold: on the dashboard a close by hand at or above the
// threshold is proposed, not made; the queue's "awaiting approval" filter finds only it; a
// rejection needs a note and ends the proposal; a new proposal is approved by an admin;
// a close below the threshold goes through at once.
func TestDashboardProposesCloseAboveThreshold(t *testing.T) {
	t.Parallel()
	min := int64(1000)
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: &min}))
	big, other := e.notSentUnknown(t, "8001"), e.notSentUnknown(t, "8002")
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	root := e.signIn(t, "root@example.com", desk.RoleAdmin)
	closeForm := url.Values{"version": {itoa(big.Version)}, "to": {"succeeded"}, "provider_ref": {"re_by_hand"}, "note": {"Stripe shows it."}}

	_, body := e.page(t, alice, "/ops/"+big.ID)
	mustContain(t, body, `data-testid="close-approval"`, "is at or above the approval threshold (10.00 USD)")
	e.post(t, alice, "/ops/"+big.ID+"/close", closeForm)
	if cur := e.get(t, big.ID); cur.Status != ops.StatusUnknown || cur.Version != big.Version {
		t.Fatalf("a proposed close changed the operation: %s v%d", cur.Status, cur.Version)
	}
	_, body = e.page(t, alice, "/ops/"+big.ID)
	mustContain(t, body, "Proposed: a second person must approve this close", `data-testid="proposal-own"`, "close by hand as succeeded")
	_, body = e.page(t, bob, "/ops?tab=unknown&awaiting=1&refresh=0")
	if !strings.Contains(body, `data-id="`+big.ID+`"`) || strings.Contains(body, `data-id="`+other.ID+`"`) {
		t.Fatalf("the awaiting filter lists the wrong rows:\n%s", body)
	}
	mustContain(t, body, `data-testid="queue-awaiting"`, "alice@example.com proposed close by hand as succeeded")

	e.post(t, bob, "/ops/"+big.ID+"/close", closeForm)
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, "awaits approval until", "so a newer one is refused")

	e.post(t, bob, "/ops/"+big.ID+"/reject", url.Values{"version": {itoa(big.Version)}, "note": {" "}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, "Write a note that says why you reject")
	e.post(t, bob, "/ops/"+big.ID+"/reject", url.Values{"version": {itoa(big.Version)}, "note": {"No such refund in Stripe."}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, `data-state="rejected"`, "No such refund in Stripe.", "Proposed close rejected")

	e.post(t, alice, "/ops/"+big.ID+"/close", closeForm)
	if resp := e.post(t, root, "/ops/"+big.ID+"/approve", url.Values{"version": {itoa(big.Version)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve = %d", resp.StatusCode)
	}
	if cur := e.get(t, big.ID); cur.Status != ops.StatusSucceeded || cur.ClosedBy != "alice@example.com" {
		t.Fatalf("after the admin's approval: %s by %q", cur.Status, cur.ClosedBy)
	}
	_, body = e.page(t, root, "/ops/"+big.ID)
	mustContain(t, body, `data-state="approved"`, "Proposed by alice@example.com, approved by root@example.com.")

	if _, err := e.db.Pool.Exec(t.Context(), `UPDATE operations SET amount_cents = 999 WHERE id = $1`, other.ID); err != nil {
		t.Fatal(err)
	}
	small := e.get(t, other.ID)
	e.post(t, alice, "/ops/"+small.ID+"/close", url.Values{"version": {itoa(small.Version)}, "to": {"succeeded"}, "provider_ref": {"re_small"}, "note": {"seen"}})
	if cur := e.get(t, small.ID); cur.Status != ops.StatusSucceeded {
		t.Fatalf("a close below the threshold is %s", cur.Status)
	}
}

// TestApprovalFindsRefundMadeMeanwhile: a close as not executed is proposed after a lookup
// that found nothing; the refund then shows up at Stripe. The approval's fresh lookup finds
// it, so the operation closes as succeeded with it, never as failed, and the proposal is
// superseded.
func TestApprovalFindsRefundMadeMeanwhile(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{NotExecuted: true}))
	op := e.notSentUnknown(t, "8101")
	e.clock.Advance(25 * time.Hour)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	e.post(t, alice, "/ops/"+op.ID+"/close-not-executed", url.Values{"version": {itoa(op.Version)}, "note": {"Nothing at Stripe."}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the proposal closed it as %s", cur.Status)
	}
	// A script outside Settle refunds it with the operation's metadata.
	if res := e.adapter.Send(context.Background(), op, &ops.Attempt{N: 2}); res.Outcome != ops.OutcomeOK {
		t.Fatalf("fake Stripe refused the late refund: %+v", res)
	}
	e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}})
	cur := e.get(t, op.ID)
	if cur.Status != ops.StatusSucceeded || cur.ProviderRef != e.fake.Refunds()[0].ID {
		t.Fatalf("after the approval: %s with %q", cur.Status, cur.ProviderRef)
	}
	_, body := e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "The proposal was superseded", `data-state="superseded"`)
}
