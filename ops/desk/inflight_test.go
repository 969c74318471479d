package desk_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/refund/refundtest"
)

// refundDesk is a desk over the refund tool of a world with the fake Stripe.
func refundDesk(t *testing.T) (*refundtest.World, *desk.Desk) {
	t.Helper()
	w := refundtest.New(t, 2*time.Second, 5*time.Second)
	l := w.Refunds.Ledger
	l.Register(refund.Kind())
	return w, &desk.Desk{Ledger: l, Refunds: w.Refunds, Events: w.DB, Audit: deskstore.New(w.DB)}
}

// storyRefund is the intent of the world's story refund, kept by Stripe's key for a day.
func storyRefund(w *refundtest.World) ops.Intent {
	return ops.Intent{TenantID: w.Tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "4417:3800:usd",
		Fingerprint: "fp-4417", OrderRef: "4417", AmountCents: 3800, Currency: "usd", PaymentRef: refundtest.Story,
		Retention: 24 * time.Hour}
}

// TestNoCloseAsNotExecutedWhileATakenOverSendMayRun defends ops rule 11: nothing frees an
// intent while the provider may still run its key. A worker sends a refund's second attempt
// just before the key retention ends and loses its database: its Stripe call goes on, but
// its lease is never renewed, so once the retention has passed the reaper expires the
// operation and records the attempt as ended (lease_expired). A lookup then finds nothing,
// because the call has not reached Stripe yet; a close as not executed at that moment would
// free the intent for a new refund under a new key while this one still lands. The close is
// refused, and the lookup does not offer it, while the attempt's send may run; once the call lands, a lookup closes the
// operation with its refund, and Stripe holds one refund.
func TestNoCloseAsNotExecutedWhileATakenOverSendMayRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, d := refundDesk(t)
	l, seed := d.Ledger, opstest.New(d.Ledger, w.DB)
	o, err := seed.Open(ctx, storyRefund(w), "r1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := seed.Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"})
	if err == nil {
		op, err = seed.Release(ctx, op, "w1")
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Clock.Set(op.RetryUntil.Add(-2 * time.Second))
	op, err = seed.Claim(ctx, op, "w2")
	if err != nil {
		t.Fatal(err)
	}
	op, second, err := seed.BeginAttempt(ctx, op, "w2")
	if err != nil {
		t.Fatal(err)
	}
	// w2 has lost its database: nothing renews its lease while its call goes on.
	w.Clock.Set(op.LeaseUntil.Add(time.Second))
	if n, err := l.ExpireDue(ctx, "reaper"); err != nil || n != 1 {
		t.Fatalf("expire: %d (%v), want the stalled operation expired", n, err)
	}
	looked, err := d.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || looked.Outcome != desk.LookupNotFound || strings.Contains(looked.Message, "can be closed as not executed") {
		t.Fatalf("lookup while attempt 2's send may run: %+v (%v), want not found, offering no close as not executed", looked, err)
	}
	cur, err := l.Get(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CloseNotExecuted(ctx, op.ID, cur.Version, "Stripe shows nothing.", "oncall@example.com")
	if got, _ := l.Get(ctx, op.ID); ops.ErrorCode(err) != ops.ECONFLICT || got.Status != ops.StatusExpired {
		t.Fatalf("close as not executed while attempt 2's send may run: %v, operation %s; want ECONFLICT and no change", err, got.Status)
	}

	// w2's call lands under the operation's key.
	if res := w.Adapter.Send(ctx, op, second); res.Outcome != ops.OutcomeOK {
		t.Fatalf("the late send: %+v", res)
	}
	looked, err = d.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || looked.Outcome != desk.LookupClosed || looked.Op.Status != ops.StatusSucceeded {
		t.Fatalf("lookup after the late send: %+v (%v), want closed as succeeded", looked, err)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("Stripe holds %d refunds, want 1", n)
	}
}

// TestALookupThatFindsNothingOffersOnlyTheCloseItWouldAccept defends ops rule 12: a lookup
// that finds nothing tells the person whether the operation can be closed as not executed,
// and says so only where the close would accept it (ops rule 11). Past the key retention, a
// stalled operation whose attempt has no result yet is not closable: the hint says why, and
// the close refuses. Once the reaper recorded the attempt's end and its send can no longer
// run, the hint offers the close, and the close is accepted.
func TestALookupThatFindsNothingOffersOnlyTheCloseItWouldAccept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, d := refundDesk(t)
	o, err := opstest.New(d.Ledger, w.DB).Open(ctx, storyRefund(w), "r1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	offered := "can be closed as not executed"
	step := func(name string, closable bool) {
		t.Helper()
		looked, err := d.Lookup(ctx, o.Op.ID, "oncall@example.com")
		if err != nil || looked.Outcome != desk.LookupNotFound {
			t.Fatalf("%s: lookup %+v (%v), want not found", name, looked, err)
		}
		cur, err := d.Ledger.Get(ctx, o.Op.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, cerr := d.CloseNotExecuted(ctx, cur.ID, cur.Version, "Stripe shows nothing.", "oncall@example.com")
		if says := strings.Contains(looked.Message, offered); says != closable || (cerr == nil) != closable {
			t.Fatalf("%s: the lookup says %q and the close answers %v; want both to say closable = %v", name, looked.Message, cerr, closable)
		}
	}
	// Past the retention, before the reaper ran: attempt 1 has no result.
	w.Clock.Set(o.Op.RetryUntil.Add(time.Minute))
	step("an attempt without a result", false)
	if n, err := d.Ledger.ExpireDue(ctx, "reaper"); err != nil || n != 1 {
		t.Fatalf("expire: %d (%v)", n, err)
	}
	// The reaper recorded the end of attempt 1, begun a day ago: its send is long over.
	step("an attempt that lost its lease a day ago", true)
}
