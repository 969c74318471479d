package web_test

import (
	"net/url"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestACloseByHandCannotClaimARecordAnotherCloseByHandClaimed: a refund id that Settle knows
// only because a person closed another operation with it by hand (no attempt got it back, no
// lookup or webhook recorded it) is that operation's record all the same. Pasting it into
// the close of a second operation is refused in a sentence naming the first, and nothing is
// closed: two customers would be told of one refund (ops rules 9 and 12).
func TestACloseByHandCannotClaimARecordAnotherCloseByHandClaimed(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)

	first, second := e.notSentUnknown(t, "9401"), e.notSentUnknown(t, "9402")
	ref := e.heldRefund(t, first, "re_3PbyHand9401")
	e.post(t, alice, "/ops/"+first.ID+"/close", url.Values{"version": {itoa(first.Version)}, "to": {"succeeded"},
		"provider_ref": {ref}, "note": {"Stripe's dashboard shows the refund."}})
	if cur := e.get(t, first.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != ref {
		t.Fatalf("the first close by hand left %s with %q", cur.Status, cur.ProviderRef)
	}

	e.post(t, alice, "/ops/"+second.ID+"/close", url.Values{"version": {itoa(second.Version)}, "to": {"succeeded"},
		"provider_ref": {" " + ref + " "}, "note": {"Stripe shows it."}})
	if cur := e.get(t, second.ID); cur.Version != second.Version {
		t.Fatalf("a close with %s's record, given by hand, changed %s: %s with %q", first.ID, second.ID, cur.Status, cur.ProviderRef)
	}
	_, body := e.page(t, alice, "/ops/"+second.ID)
	mustContain(t, body, ref+" is the provider&#39;s record of operation "+first.ID, "Nothing was changed.")
}
