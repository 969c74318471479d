package recon_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// sentIn refunds order on connPI for shop, bound to acct_A, and returns its succeeded
// operation.
func (w *world) sentIn(t *testing.T, order string, cents int64) *ops.Operation {
	t.Helper()
	o := w.openOn(t, connPI, order, cents)
	op, err := w.seed().Finish(context.Background(), o.Op, o.Attempt, "w1", w.send(t, o))
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("refund %s: %+v (%v)", order, op, err)
	}
	return op
}

// TestAMovedTenantsOldAccountIsStillAskedAboutItsRefunds: shop's refunds were sent to
// acct_A; shop is then moved to acct_C and acct_A fails both refunds. A lookup of one asks
// acct_A, the account it was sent to, and fails it after success; reconciliation still
// lists acct_A, where the other's refund is, and fails it too. Money that did not move is
// never left shown as refunded (ops rules 9 and 12).
func TestAMovedTenantsOldAccountIsStillAskedAboutItsRefunds(t *testing.T) {
	t.Parallel()
	w := connectedWorld(t)
	ctx := context.Background()
	looked, reconciled := w.sentIn(t, "700", 1200), w.sentIn(t, "701", 1300)
	if _, err := w.db.SetStripeAccount(ctx, "shop", "acct_C", "test", w.clock.Now()); err != nil {
		t.Fatalf("move shop to acct_C: %v", err)
	}
	for _, op := range []*ops.Operation{looked, reconciled} {
		if err := w.fake.SetRefundStatus(op.ProviderRef, "failed", "declined"); err != nil {
			t.Fatal(err)
		}
	}

	tool := &refund.Tool{Ledger: w.ledger, Store: w.db, Provider: w.adapter}
	before := len(w.fake.Calls())
	if _, applied, err := tool.Lookup(ctx, w.db, looked.ID, "oncall@example.com"); err != nil || applied.Outcome != "failed_after_success" {
		t.Fatalf("lookup after the move: %+v %v, want failed_after_success", applied, err)
	}
	for _, c := range w.fake.Calls()[before:] {
		if c.Account != "acct_A" {
			t.Errorf("the lookup read outside acct_A, where the refund was sent: %+v", c)
		}
	}

	before = len(w.fake.Calls())
	if rep, err := w.recon.Reconcile(ctx, "stripe", w.window()); err != nil {
		t.Fatalf("run: %v (%s)", err, rep.Summary())
	}
	listed := map[string]bool{}
	for _, c := range w.fake.Calls()[before:] {
		if c.Method == "GET" && c.Path == "/v1/refunds" {
			listed[c.Account] = true
		}
	}
	if !listed["acct_A"] || !listed["acct_C"] {
		t.Fatalf("reconciliation listed %v, want acct_A, which holds shop's refunds, and acct_C", listed)
	}
	for _, op := range []*ops.Operation{looked, reconciled} {
		if cur, _ := w.db.Get(ctx, op.ID); cur.Status != ops.StatusFailed {
			t.Errorf("operation %s is %s after acct_A failed its refund (ops rule 9)", op.OrderRef, cur.Status)
		}
		if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1`, op.ID); n != 1 {
			t.Errorf("operation %s: %d failed_after_success exceptions, want 1 (ops rule 12)", op.OrderRef, n)
		}
	}
}
