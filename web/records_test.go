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
// that was made for someone else. An approval checks it again, so a record claimed by
// another operation after the proposal is refused too; the operation's own record is
// accepted (ops rules 9 and 12).
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

	// A proposal names a refund nobody claims yet; by the time of the approval, a lookup has
	// found it to be another operation's.
	big, later := e.notSentUnknown(t, "9304"), e.refundedButUnknown(t, "9305")
	if _, err := e.db.Pool.Exec(ctx, `UPDATE operations SET amount_cents = 5000 WHERE id = $1`, big.ID); err != nil {
		t.Fatal(err)
	}
	big = e.get(t, big.ID)
	ref := e.fake.Refunds()[len(e.fake.Refunds())-1].ID
	e.post(t, alice, "/ops/"+big.ID+"/close", url.Values{"version": {itoa(big.Version)}, "to": {"succeeded"}, "provider_ref": {ref}, "note": {"Stripe shows it."}})
	_, body = e.page(t, bob, "/ops/"+big.ID)
	proposal := shownProposal(body)
	e.post(t, bob, "/ops/"+later.ID+"/lookup", url.Values{})
	e.post(t, bob, "/ops/"+big.ID+"/approve", url.Values{"version": {itoa(big.Version)}, "proposal_id": {proposal}})
	if cur := e.get(t, big.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the approval closed %s with %s's record: %s", big.ID, later.ID, cur.Status)
	}
	_, body = e.page(t, bob, "/ops/"+big.ID)
	mustContain(t, body, ref+" is the provider&#39;s record of operation "+later.ID)

	own := e.refundedButUnknown(t, "9306")
	ownRef := e.fake.Refunds()[len(e.fake.Refunds())-1].ID
	e.post(t, alice, "/ops/"+own.ID+"/close", url.Values{"version": {itoa(own.Version)}, "to": {"succeeded"}, "provider_ref": {ownRef}, "note": {"Stripe shows it."}})
	if cur := e.get(t, own.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != ownRef {
		t.Fatalf("a close with the operation's own record: %s with %q", cur.Status, cur.ProviderRef)
	}
}
