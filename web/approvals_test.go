package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
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
	closeForm := url.Values{"version": {itoa(big.Version)}, "to": {"succeeded"}, "provider_ref": {e.heldRefund(t, big, "re_by_hand")}, "note": {"Stripe shows it."}}

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
	seen := shownProposal(body)

	e.post(t, bob, "/ops/"+big.ID+"/reject", url.Values{"version": {itoa(big.Version)}, "proposal_id": {seen}, "note": {" "}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, "Write a note that says why you reject")
	e.post(t, bob, "/ops/"+big.ID+"/reject", url.Values{"version": {itoa(big.Version)}, "proposal_id": {seen}, "note": {"No such refund in Stripe."}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, `data-state="rejected"`, "No such refund in Stripe.", "Proposed close rejected")

	e.post(t, alice, "/ops/"+big.ID+"/close", closeForm)
	_, body = e.page(t, root, "/ops/"+big.ID)
	if resp := e.post(t, root, "/ops/"+big.ID+"/approve", url.Values{"version": {itoa(big.Version)}, "proposal_id": {shownProposal(body)}}); resp.StatusCode != http.StatusSeeOther {
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
	e.post(t, alice, "/ops/"+small.ID+"/close", url.Values{"version": {itoa(small.Version)}, "to": {"succeeded"}, "provider_ref": {e.heldRefund(t, small, "re_small")}, "note": {"seen"}})
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
	_, body := e.page(t, bob, "/ops/"+op.ID)
	e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {shownProposal(body)}})
	cur := e.get(t, op.ID)
	if cur.Status != ops.StatusSucceeded || cur.ProviderRef != e.fake.Refunds()[0].ID {
		t.Fatalf("after the approval: %s with %q", cur.Status, cur.ProviderRef)
	}
	_, body = e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "The proposal was superseded", `data-state="superseded"`)
}

// shownProposal is the proposal id the approve and reject forms of a page carry, "" when
// they carry none.
func shownProposal(body string) string {
	m := regexp.MustCompile(`name="proposal_id" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestApproveRefusesReplacedProposal: bob opens a proposal to close as succeeded with one
// record; meanwhile alice withdraws it and proposes another record. Bob's approval of what
// he saw is refused and closes nothing, and so is his rejection; the proposal he did not
// see stays open until someone approves it having seen it (ops rule 13).
func TestApproveRefusesReplacedProposal(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: new(int64)}))
	op := e.notSentUnknown(t, "8201")
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	propose := func(ref string) {
		t.Helper()
		e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
			"provider_ref": {e.heldRefund(t, op, ref)}, "note": {"Stripe shows " + ref + "."}})
	}
	propose("re_shown")
	_, body := e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "re_shown", `data-testid="approve-form"`)
	seen := shownProposal(body)
	if seen == "" {
		t.Errorf("the approve form carries no proposal id")
		pr, err := e.desk.Proposal(t.Context(), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		seen = itoa(pr.ID)
	}

	e.post(t, alice, "/ops/"+op.ID+"/reject", url.Values{"version": {itoa(op.Version)}, "proposal_id": {seen}, "note": {"Wrong record."}})
	propose("re_other")
	e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {seen}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("bob's approval of re_shown closed it as %s with %q", cur.Status, cur.ProviderRef)
	}
	_, body = e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "The proposal you saw was withdrawn or replaced; nothing was changed.", "re_other", `data-state="open"`)
	e.post(t, bob, "/ops/"+op.ID+"/reject", url.Values{"version": {itoa(op.Version)}, "proposal_id": {seen}, "note": {"No."}})
	_, body = e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "The proposal you saw was withdrawn or replaced; nothing was changed.", `data-state="open"`)

	now := shownProposal(body)
	if now == "" || now == seen {
		t.Fatalf("the page shows proposal %q, want the new one", now)
	}
	e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {now}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != "re_other" {
		t.Fatalf("bob's approval of re_other: %s with %q", cur.Status, cur.ProviderRef)
	}
	carol := e.signIn(t, "carol@example.com", desk.RoleOncall)
	e.post(t, carol, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {now}})
	_, body = e.page(t, carol, "/ops/"+op.ID)
	mustContain(t, body, "bob@example.com approved it first: closed as succeeded as alice@example.com proposed; nothing more was changed.")
}

// vouchedAccounts signs in root (an admin), bob and carol (on-call) on a dashboard where every
// close needs approval, and gives the accounts root vouched for within a proposal's
// lifetime: puppet, which root added, and carol, whom root disabled and enabled again.
func vouchedAccounts(t *testing.T) (e *dashEnv, root, bob *http.Client, vouched map[string]*http.Client) {
	t.Helper()
	e = newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: new(int64)}))
	root = e.signIn(t, "root@example.com", desk.RoleAdmin)
	bob = e.signIn(t, "bob@example.com", desk.RoleOncall)
	e.signIn(t, "carol@example.com", desk.RoleOncall)
	e.post(t, root, "/admin/users", url.Values{"email": {"puppet@example.com"}, "password": {password}, "role": {"oncall"}})
	puppet := client(t)
	if resp := e.login(t, puppet, "puppet@example.com", password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the new account signs in: %d", resp.StatusCode)
	}
	var carolID int64
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id FROM users WHERE email = 'carol@example.com'`).Scan(&carolID); err != nil {
		t.Fatal(err)
	}
	e.post(t, root, "/admin/users/"+itoa(carolID)+"/disable", nil)
	e.clock.Advance(time.Hour)
	e.post(t, root, "/admin/users/"+itoa(carolID)+"/enable", nil)
	// Disabling ended carol's sessions: she signs in again.
	carol := client(t)
	if resp := e.login(t, carol, "carol@example.com", password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol signs in again: %d", resp.StatusCode)
	}
	return e, root, bob, map[string]*http.Client{"puppet": puppet, "carol": carol}
}

// TestApproverWhoVouchedForProposerIsRefused: an admin who added a user, or re-enabled one,
// cannot approve that user's proposal made within a proposal's lifetime of it, however
// the account was used; another person can (ops rule 13).
func TestApproverWhoVouchedForProposerIsRefused(t *testing.T) {
	t.Parallel()
	e, root, bob, vouched := vouchedAccounts(t)
	for who, c := range vouched {
		op := e.notSentUnknown(t, "8301-"+who)
		e.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
			"provider_ref": {e.heldRefund(t, op, "re_"+who)}, "note": {"Stripe shows it."}})
		_, body := e.page(t, root, "/ops/"+op.ID)
		id := shownProposal(body)
		e.post(t, root, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {id}})
		if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
			t.Fatalf("root approved %s's proposal: %s", who, cur.Status)
		}
		_, body = e.page(t, root, "/ops/"+op.ID)
		mustContain(t, body, "a person who did not vouch for that account must approve it")
		e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {id}})
		if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded {
			t.Fatalf("bob's approval of %s's proposal: %s", who, cur.Status)
		}
	}
}

// TestProposerWhoVouchedForApproverIsRefused: an admin who added a user, or re-enabled one,
// cannot have that account approve the admin's own proposal made within a proposal's
// lifetime of it, since whoever makes an account may know its password; another person can
// (ops rule 13).
func TestProposerWhoVouchedForApproverIsRefused(t *testing.T) {
	t.Parallel()
	e, root, bob, vouched := vouchedAccounts(t)
	for who, c := range vouched {
		op := e.notSentUnknown(t, "8401-"+who)
		e.post(t, root, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
			"provider_ref": {e.heldRefund(t, op, "re_"+who)}, "note": {"Stripe shows it."}})
		_, body := e.page(t, c, "/ops/"+op.ID)
		id := shownProposal(body)
		e.post(t, c, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {id}})
		if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
			t.Fatalf("%s, whose account root vouched for, approved root's proposal: %s", who, cur.Status)
		}
		_, body = e.page(t, c, "/ops/"+op.ID)
		mustContain(t, body, "a person whose account root@example.com did not vouch for must approve it")
		e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {id}})
		if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded {
			t.Fatalf("bob's approval of root's proposal: %s", cur.Status)
		}
	}
}
