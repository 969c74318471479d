package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
)

// TestACloseByHandWithEvidenceThatIsNotARecordIsRefused: the record id of a close as
// succeeded pasted empty, as blanks, or absurdly long is refused in a sentence, and the
// operation is left as it was (ops rule 9).
func TestACloseByHandWithEvidenceThatIsNotARecordIsRefused(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9611")
	for ref, says := range map[string]string{
		"":                                "Succeeded needs the provider&#39;s record",
		" \t ":                            "Succeeded needs the provider&#39;s record",
		"re_" + strings.Repeat("x", 5000): "may hold only letters, digits",
	} {
		e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
			"provider_ref": {ref}, "note": {"Stripe shows it."}})
		if cur := e.get(t, op.ID); cur.Version != op.Version {
			t.Fatalf("a close with the record %.20q changed the operation: %s", ref, cur.Status)
		}
		_, body := e.page(t, alice, "/ops/"+op.ID)
		mustContain(t, body, says, "Nothing was changed.")
	}
}

// TestACloseByHandWithARefundStripeContradictsIsRefused: the engineer pastes a refund id
// that Stripe holds, but not as this operation's refund: it failed, it refunds another
// payment, or it moved another amount. Each close as succeeded is refused in a sentence
// that says what Stripe holds, and nothing is closed: the customer would be told of a
// refund that never reached them (ops rules 9 and 12). A refund made by hand in Stripe's
// dashboard on the operation's own payment, for its amount, is accepted.
func TestACloseByHandWithARefundStripeContradictsIsRefused(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9612")
	e.fake.AddPaymentIntent("pi_elsewhere9612", 5000, "usd")
	at := time.Now().UTC()
	if err := e.fake.ImportRefunds([]fake.Refund{
		{ID: "re_failed9612", PaymentIntent: op.PaymentRef, Currency: "usd", Status: "failed", Amount: op.AmountCents, Created: at},
		{ID: "re_other9612", PaymentIntent: "pi_elsewhere9612", Currency: "usd", Status: "succeeded", Amount: op.AmountCents, Created: at},
		{ID: "re_amount9612", PaymentIntent: op.PaymentRef, Currency: "usd", Status: "succeeded", Amount: op.AmountCents - 1, Created: at},
		{ID: "re_good9612", PaymentIntent: op.PaymentRef, Currency: "usd", Status: "succeeded", Amount: op.AmountCents, Created: at},
	}); err != nil {
		t.Fatal(err)
	}
	for ref, says := range map[string]string{
		"re_failed9612": "failed",
		"re_other9612":  "pi_elsewhere9612",
		"re_amount9612": ops.FormatMoney(1199, "usd"),
	} {
		e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
			"provider_ref": {ref}, "note": {"Stripe shows it."}})
		if cur := e.get(t, op.ID); cur.Version != op.Version {
			t.Fatalf("a close with %s changed the operation: %s with %q", ref, cur.Status, cur.ProviderRef)
		}
		_, body := e.page(t, alice, "/ops/"+op.ID)
		mustContain(t, body, ref, says, "Nothing was changed.")
	}
	e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
		"provider_ref": {"re_good9612"}, "note": {"Refunded by hand in Stripe's dashboard."}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded || cur.ProviderRef != "re_good9612" {
		t.Fatalf("a close with the operation's own refund: %s with %q", cur.Status, cur.ProviderRef)
	}
}

// TestACloseByHandWithARefundStripeDoesNotHoldIsRefused: the engineer pastes a refund id
// Stripe holds nowhere (a typo, an id made up). The close as succeeded is refused in a
// sentence that says Stripe holds no such refund, and nothing is written: no close, no
// note, no audit row. Showing the operation as succeeded on an id no provider holds would
// be a success without the provider's evidence (ops rule 9).
func TestACloseByHandWithARefundStripeDoesNotHoldIsRefused(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9613")
	e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
		"provider_ref": {"re_madeup9613"}, "note": {"Stripe shows it."}})
	if cur := e.get(t, op.ID); cur.Version != op.Version || cur.Status != ops.StatusUnknown || cur.ProviderRef != "" {
		t.Fatalf("a close with an id Stripe does not hold changed the operation: %s v%d with %q", cur.Status, cur.Version, cur.ProviderRef)
	}
	_, body := e.page(t, alice, "/ops/"+op.ID)
	mustContain(t, body, "Stripe holds no refund re_madeup9613", "check the id", "Nothing was changed.")
	if notes, closes := e.closeRows(t, op.ID); notes != 0 || closes != 0 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want none", notes, closes)
	}
}

// TestApprovingAProposalOfARefundStripeDoesNotHoldIsRefused: a proposal to close as
// succeeded names a refund id Stripe holds nowhere; it was made before Settle asked Stripe
// about the ids people give. The second person's approval asks Stripe again and closes
// nothing, in a sentence that says Stripe holds no such refund: an approval is no
// evidence from the provider either (ops rules 9 and 13).
func TestApprovingAProposalOfARefundStripeDoesNotHoldIsRefused(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: new(int64)}))
	e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9614")
	older := *e.desk
	older.Refunds = nil
	out, err := older.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: "re_madeup9614", Note: "Stripe shows it.", Actor: "alice@example.com",
		ActorID: int64(e.count(t, `SELECT id FROM users WHERE email = 'alice@example.com'`))})
	if err != nil || out.Proposal == nil {
		t.Fatalf("the older proposal: %+v, %v", out, err)
	}
	_, body := e.page(t, bob, "/ops/"+op.ID)
	e.post(t, bob, "/ops/"+op.ID+"/approve", url.Values{"version": {itoa(op.Version)}, "proposal_id": {shownProposal(body)}})
	if cur := e.get(t, op.ID); cur.Version != op.Version || cur.Status != ops.StatusUnknown {
		t.Fatalf("the approval closed %s with a refund Stripe does not hold: %s with %q", op.ID, cur.Status, cur.ProviderRef)
	}
	_, body = e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "Stripe holds no refund re_madeup9614", "check the id")
	if notes, closes := e.closeRows(t, op.ID); notes != 0 || closes != 0 {
		t.Fatalf("%d note evidence rows and %d close audit rows, want none", notes, closes)
	}
}

// heldRefund makes ref a refund Stripe holds as op's: succeeded, on op's payment, for op's
// amount, as one made by hand in Stripe's dashboard would be. A close by hand as succeeded
// names such a refund, since Settle refuses an id Stripe does not hold (ops rule 9).
func (e *dashEnv) heldRefund(t *testing.T, op *ops.Operation, ref string) string {
	t.Helper()
	at := time.Now().UTC()
	if held := e.fake.Refunds(); len(held) > 0 && held[len(held)-1].Created.After(at) {
		at = held[len(held)-1].Created
	}
	if err := e.fake.ImportRefunds([]fake.Refund{{ID: ref, PaymentIntent: op.PaymentRef, Currency: op.Currency,
		Status: "succeeded", Amount: op.AmountCents, Created: at}}); err != nil {
		t.Fatal(err)
	}
	return ref
}

// refundedButUnknownOf is refundedButUnknown for a refund of cents.
func (e *dashEnv) refundedButUnknownOf(t *testing.T, order string, cents int64) *ops.Operation {
	t.Helper()
	op, a := e.open(t, order, cents)
	if res := e.adapter.Send(context.Background(), op, a); res.Outcome != ops.OutcomeOK {
		t.Fatalf("fake Stripe refused the refund: %+v", res)
	}
	return e.lose(t, op, a)
}
