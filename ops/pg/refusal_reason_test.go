package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// reasonOf is the reason recorded on the refused request ref, "" for none.
func (f *fixture) reasonOf(t *testing.T, ref string) string {
	t.Helper()
	var reason *string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT reason FROM client_requests WHERE request_ref = $1 AND answer = 'rejected'`,
		ref).Scan(&reason); err != nil {
		t.Fatalf("the refused request %s: %v", ref, err)
	}
	if reason == nil {
		return ""
	}
	return *reason
}

// TestEveryRefusalIsRecordedWithItsReason: ops rule 8 records every refused request, and the
// built-in rules tell a tenant stopped by its LLM budget from a malformed request by why it
// was refused, so each way the ledger records a refusal records the reason its client was
// answered with: a refusal before admission (Refuse), admission's check refusing a new
// operation, and a request whose deadline cut admission's read.
func TestEveryRefusalIsRecordedWithItsReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	malformed := &ops.Error{Code: ops.EINVALID, Reason: "amount_not_positive", Message: "The amount must be above zero."}
	if err := f.ledger.Refuse(ctx, f.tenant, ops.KindRefund, "req-malformed", malformed); ops.ErrorReason(err) != "amount_not_positive" {
		t.Fatalf("Refuse answered %v, want the refusal", err)
	}
	spent := &ops.Error{Code: ops.EUNAVAILABLE, Reason: "tenant_budget_spent", Message: "Your tenant's budget is spent."}
	in := f.refund("ord_checked", 900)
	in.RequestRef, in.Owner = "req-checked", "worker-a"
	in.Check = func(context.Context) error { return spent }
	if _, err := f.ledger.Admit(ctx, in); ops.ErrorReason(err) != "tenant_budget_spent" {
		t.Fatalf("Admit answered %v, want the check's refusal", err)
	}
	late := f.refund("ord_late", 900)
	late.RequestRef, late.Owner = "req-late", "worker-a"
	late.Check = func(context.Context) error { return nil }
	cut, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, lateErr := f.ledger.Admit(cut, late)
	if lateErr == nil {
		t.Fatal("an admission whose deadline had passed went through")
	}
	for ref, want := range map[string]string{"req-malformed": "amount_not_positive", "req-checked": "tenant_budget_spent",
		"req-late": ops.ErrorReason(lateErr)} {
		if got := f.reasonOf(t, ref); got != want || got == "" {
			t.Errorf("the refused request %s is recorded with reason %q, want %q", ref, got, want)
		}
	}
}
