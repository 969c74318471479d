package recon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	stripelib "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

const connPI = "pi_conn"

// connectedWorld is the reconciler's world with the adapter reading tenants' bindings from
// the store, "shop" bound to acct_A (where connPI was paid) and "bank" bound to acct_B.
func connectedWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	ctx := context.Background()
	w.adapter = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: w.base, AttemptTimeout: 300 * time.Millisecond,
		ReadsPerSecond: 50, Accounts: w.db})
	w.recon.Refunds = []recon.RefundSource{w.adapter}
	if _, err := w.db.EnsureTenant(ctx, "bank"); err != nil {
		t.Fatal(err)
	}
	for name, acct := range map[string]string{"shop": "acct_A", "bank": "acct_B"} {
		if _, err := w.db.SetStripeAccount(ctx, name, acct, "test", w.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.fake.AddConnectedPaymentIntent("acct_A", connPI, 100_000, "usd"); err != nil {
		t.Fatal(err)
	}
	if err := w.fake.AddConnectedPaymentIntent("acct_B", "pi_b", 100_000, "usd"); err != nil {
		t.Fatal(err)
	}
	return w
}

// openOn opens a refund operation of shop on payment, leased to "w1", its attempt begun.
func (w *world) openOn(t *testing.T, payment, order string, cents int64) ops.Admission {
	t.Helper()
	o, err := w.seed().Open(context.Background(), ops.Intent{TenantID: w.tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: refund.IntentKey(order, cents, "usd"), Fingerprint: "fp-" + order, OrderRef: order, PaymentRef: payment,
		AmountCents: cents, Currency: "usd", Retention: 24 * time.Hour}, "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// lostIn leaves an operation of shop unknown whose refund the fake made in acct_A while
// the attempt timed out.
func (w *world) lostIn(t *testing.T, order string, cents int64) *ops.Operation {
	t.Helper()
	w.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Delay: 600 * time.Millisecond})
	defer w.fake.ClearFaults()
	held := len(w.fake.Refunds())
	o := w.openOn(t, connPI, order, cents)
	if res := w.send(t, o); res.Outcome != ops.OutcomeTimeout {
		t.Fatalf("send %s: %+v, want a timeout", order, res)
	}
	op := w.toUnknown(t, o, ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"})
	w.waitForFakeRefunds(t, held+1)
	return op
}

// toUnknown finishes the operation's attempt with res and leaves it unknown.
func (w *world) toUnknown(t *testing.T, o ops.Admission, res ops.AttemptResult) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	op, err := w.seed().Finish(ctx, o.Op, o.Attempt, "w1", res)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown {
		if op, err = w.seed().Release(ctx, op, "w1"); err != nil {
			t.Fatal(err)
		}
		if op, err = w.seed().MarkUnknown(ctx, op, "test", "timed out"); err != nil {
			t.Fatal(err)
		}
	}
	return op
}

// refundIn makes a refund nobody recorded, in account ("" for the platform), on payment,
// carrying metadata.
func (w *world) refundIn(t *testing.T, account, payment string, cents int64, metadata map[string]string) *stripelib.Refund {
	t.Helper()
	p := &stripelib.RefundParams{PaymentIntent: stripelib.String(payment), Amount: stripelib.Int64(cents), Metadata: metadata}
	if account != "" {
		p.SetStripeAccount(account)
	}
	r, err := w.outside.Refunds.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBoundTenantsLookupsAndReconciliationUseItsAccount: unknown operations of the tenant
// bound to acct_A are looked up in acct_A and closed by the lookup or by reconciliation,
// which lists the platform and every bound account. Refunds in acct_B or in the platform
// account whose metadata names an operation of that tenant close nothing and charge it with
// nothing: each is its account's orphan.
func TestBoundTenantsLookupsAndReconciliationUseItsAccount(t *testing.T) {
	t.Parallel()
	w := connectedWorld(t)
	ctx := context.Background()
	looked, reconciled := w.lostIn(t, "500", 2500), w.lostIn(t, "501", 2600)
	never := w.toUnknown(t, w.openOn(t, connPI, "502", 2700), ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	forged := map[string]string{stripe.MetadataKey: never.ID}
	fromB := w.refundIn(t, "acct_B", "pi_b", 2700, forged)
	fromPlatform := w.refundIn(t, "", pi, 2700, forged)

	tool := &refund.Tool{Ledger: w.ledger, Store: w.db, Provider: w.adapter}
	before := len(w.fake.Calls())
	res, applied, err := tool.Lookup(ctx, w.db, looked.ID, "oncall@example.com")
	if err != nil || !res.Found() || applied.Outcome != "closed" || applied.Op.Status != ops.StatusSucceeded {
		t.Fatalf("lookup in acct_A: %+v %+v %v", res, applied, err)
	}
	for _, c := range w.fake.Calls()[before:] {
		if c.Account != "acct_A" {
			t.Errorf("the lookup read outside acct_A: %+v", c)
		}
	}

	before = len(w.fake.Calls())
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Closed != 1 || rep.Orphans != 2 || rep.DoubleCharges != 0 || rep.Listed != 4 {
		t.Fatalf("run: %s", rep.Summary())
	}
	listed := map[string]bool{}
	for _, c := range w.fake.Calls()[before:] {
		if c.Method == "GET" && c.Path == "/v1/refunds" {
			listed[c.Account] = true
		}
	}
	if !listed[""] || !listed["acct_A"] || !listed["acct_B"] {
		t.Fatalf("reconciliation listed %v, want the platform, acct_A and acct_B", listed)
	}
	if op, _ := w.db.Get(ctx, reconciled.ID); op.Status != ops.StatusSucceeded || !strings.HasPrefix(op.ClosedBy, "stripe reconciliation") {
		t.Fatalf("the unknown operation in acct_A: %s by %q", op.Status, op.ClosedBy)
	}
	if op, _ := w.db.Get(ctx, never.ID); op.Status != ops.StatusUnknown || op.Version != never.Version {
		t.Fatalf("a refund from another account changed the operation to %s", op.Status)
	}
	for ref, from := range map[string]string{fromB.ID: "account acct_B", fromPlatform.ID: "the platform account"} {
		if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1 AND operation_id IS NULL AND tenant_id IS NULL`, ref); n != 1 {
			t.Errorf("the charge %s from %s is tied to an operation", ref, from)
		}
		if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'orphan_charge' AND ref = $1 AND summary LIKE '%' || $2 || '%'`, ref, from); n != 1 {
			t.Errorf("no orphan exception for %s naming %s", ref, from)
		}
	}
	// A lookup of that operation looks in acct_A only, and finds nothing there.
	if res, applied, err := tool.Lookup(ctx, w.db, never.ID, "oncall@example.com"); err != nil || res.Found() || applied.Outcome != "not_found" {
		t.Fatalf("lookup of the forged operation: %+v %+v %v", res, applied, err)
	}
}

// TestOneUnreadableAccountDoesNotHideTheOthers: when one bound account's listing fails,
// the platform's and the other accounts' refunds are still applied, and the run fails so
// the window is read again; the next run completes.
func TestOneUnreadableAccountDoesNotHideTheOthers(t *testing.T) {
	t.Parallel()
	w := connectedWorld(t)
	ctx := context.Background()
	lost := w.lostIn(t, "600", 1500)
	w.clock.Advance(time.Second)
	// The listings run platform, acct_A, acct_B, each in two parts of the window read at
	// once (one page each): acct_B's fail.
	w.fake.AddFault(fake.Fault{Method: "GET", Path: "/v1/refunds", Calls: []int{5, 6}, Kind: fake.FaultUnavailable})
	reps, err := w.recon.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "acct_B") {
		t.Fatalf("a failed account listing: %v (%+v), want an error naming acct_B", err, reps)
	}
	if op, _ := w.db.Get(ctx, lost.ID); op.Status != ops.StatusSucceeded {
		t.Fatalf("acct_A's refund was not applied while acct_B failed: %s", op.Status)
	}
	var done *time.Time
	_ = w.db.Pool.QueryRow(ctx, `SELECT done_until FROM recon_runs WHERE name = 'reconcile:stripe'`).Scan(&done)
	if done != nil {
		t.Fatalf("a run that missed an account moved the watermark to %s", done)
	}
	w.fake.ClearFaults()
	w.clock.Advance(time.Minute)
	if reps, err = w.recon.RunOnce(ctx); err != nil || reps[0].Listed != 1 {
		t.Fatalf("the next run: %+v %v", reps, err)
	}
}
