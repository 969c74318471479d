package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestACloseByHandCannotClaimAnotherOperationsRecord: an on-call engineer who pastes the
// refund id of the row beside into "close as succeeded" is refused, in a sentence naming
// the operation that refund belongs to, whether Settle saw it from a lookup or from the
// send that made it; nothing is closed and the customer is not told a refund was issued
// that was made for someone else. A refund Stripe holds for another payment is refused
// before anything is proposed, and an approval asks Stripe again, so a refund that failed
// after the proposal is refused too; the operation's own record is accepted (ops rules 9
// and 12).
func TestACloseByHandCannotClaimAnotherOperationsRecord(t *testing.T) {
	t.Parallel()
	min := int64(4000)
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: &min}))
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	ctx := context.Background()

	looked := e.refundedButUnknown(t, "9301")
	e.post(t, alice, "/ops/"+looked.ID+"/lookup", url.Values{})
	if looked = e.get(t, looked.ID); looked.Status != ops.StatusSucceeded {
		t.Fatalf("the lookup left %s", looked.Status)
	}
	sentOp, a := e.open(t, "9302", 1200)
	sent, err := e.seed().Finish(ctx, sentOp, a, "worker-1", e.adapter.Send(ctx, sentOp, a))
	if err != nil || sent.Status != ops.StatusSucceeded || sent.ProviderRef == "" {
		t.Fatalf("the send left %+v, %v", sent, err)
	}

	victim := e.notSentUnknown(t, "9303")
	for _, other := range []*ops.Operation{looked, sent} {
		e.post(t, alice, "/ops/"+victim.ID+"/close", url.Values{"version": {itoa(victim.Version)}, "to": {"succeeded"},
			"provider_ref": {"  " + other.ProviderRef + " "}, "note": {"Stripe shows it."}})
		if cur := e.get(t, victim.ID); cur.Version != victim.Version {
			t.Fatalf("a close with %s's record changed %s: %s with %q", other.ID, victim.ID, cur.Status, cur.ProviderRef)
		}
		_, body := e.page(t, alice, "/ops/"+victim.ID)
		mustContain(t, body, other.ProviderRef+" is the provider&#39;s record of operation "+other.ID, "Nothing was changed.")
	}
	_, body := e.page(t, alice, "/support?q=9303")
	if strings.Contains(body, "has been issued") {
		t.Error("the support page tells the customer a refund was issued")
	}

	// A proposal naming a refund of another payment is refused at once, from what Stripe
	// holds: nothing is proposed for a second person to approve.
	big, later := e.notSentUnknown(t, "9304"), e.refundedButUnknown(t, "9305")
	if _, err := e.db.Pool.Exec(ctx, `UPDATE operations SET amount_cents = 5000 WHERE id = $1`, big.ID); err != nil {
		t.Fatal(err)
	}
	big = e.get(t, big.ID)
	ref := e.fake.Refunds()[len(e.fake.Refunds())-1].ID
	e.post(t, alice, "/ops/"+big.ID+"/close", url.Values{"version": {itoa(big.Version)}, "to": {"succeeded"}, "provider_ref": {ref}, "note": {"Stripe shows it."}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	if shownProposal(body) != "" || e.get(t, big.ID).Status != ops.StatusUnknown {
		t.Fatalf("a close with %s's refund was proposed", later.ID)
	}
	_, body = e.page(t, alice, "/ops/"+big.ID)
	mustContain(t, body, "it refunds the payment "+later.PaymentRef)

	// A proposal names the operation's own refund; by the time of the approval, Stripe says
	// it failed. The approval asks again and closes nothing.
	bounced := e.refundedButUnknownOf(t, "9307", 5000)
	bouncedRef := e.fake.Refunds()[len(e.fake.Refunds())-1].ID
	e.post(t, alice, "/ops/"+bounced.ID+"/close", url.Values{"version": {itoa(bounced.Version)}, "to": {"succeeded"}, "provider_ref": {bouncedRef}, "note": {"Stripe shows it."}})
	_, body = e.page(t, bob, "/ops/"+bounced.ID)
	proposal := shownProposal(body)
	if err := e.fake.SetRefundStatus(bouncedRef, "failed", "expired_or_canceled_card"); err != nil {
		t.Fatal(err)
	}
	e.post(t, bob, "/ops/"+bounced.ID+"/approve", url.Values{"version": {itoa(bounced.Version)}, "proposal_id": {proposal}})
	if cur := e.get(t, bounced.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the approval closed %s with a refund Stripe says failed: %s", bounced.ID, cur.Status)
	}
	_, body = e.page(t, bob, "/ops/"+bounced.ID)
	mustContain(t, body, "its status is failed")

	own := e.refundedButUnknown(t, "9306")
	ownRef := e.fake.Refunds()[len(e.fake.Refunds())-1].ID
	e.post(t, alice, "/ops/"+own.ID+"/close", url.Values{"version": {itoa(own.Version)}, "to": {"succeeded"}, "provider_ref": {ownRef}, "note": {"Stripe shows it."}})
	if cur := e.get(t, own.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != ownRef {
		t.Fatalf("a close with the operation's own record: %s with %q", cur.Status, cur.ProviderRef)
	}
}
