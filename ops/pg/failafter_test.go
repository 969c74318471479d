package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// crashAfterTransition is the store of a process that dies right after a transition
// commits: the change is in the database, and nothing after it in the same call runs.
type crashAfterTransition struct{ *pg.DB }

func (c crashAfterTransition) Transition(ctx context.Context, p ops.TransitionParams) (*ops.Operation, error) {
	if _, err := c.DB.Transition(ctx, p); err != nil {
		return nil, err
	}
	return nil, errors.New("the process died after the commit")
}

// TestFailedAfterSuccessSurvivesACrash: a refund the provider accepted and then failed
// becomes failed after success with its reconciliation exception. A process that dies right
// after the status change must not lose the exception: the provider resends its event, and
// the operation, already failed, is then closed for every path, so the exception is raised
// before the change, once however often the record comes.
func TestFailedAfterSuccessSurvivesACrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("fas", 4200), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	ok := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: "re_fas", Body: []byte(`{"id":"re_fas","status":"pending"}`)}}
	})
	op, err := f.ledger.Run(ctx, o.Op, ok, ops.RunSpec{Owner: "w", First: o.Attempt})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("refund: %+v (%v)", op, err)
	}
	failed := ops.ProviderRecord{Provider: "stripe", Ref: "re_fas", OperationID: op.ID, AmountCents: 4200, Currency: "usd",
		Status: "failed", Created: t0}
	ev := ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated: failed"}
	dying := ops.NewLedger(crashAfterTransition{f.db}, f.clock)
	if _, err := dying.ApplyRecord(ctx, f.db, failed, ev, "webhook"); err == nil {
		t.Fatal("the dying process reported success")
	}
	for range 2 { // the provider resends its event
		if _, err := f.ledger.ApplyRecord(ctx, f.db, failed, ev, "webhook"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := f.db.Get(ctx, op.ID); got.Status != ops.StatusFailed {
		t.Fatalf("the operation is %s, want failed", got.Status)
	}
	if n := f.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d failed-after-success exceptions, want 1", n)
	}
}

// succeededRefund opens a refund of order and runs it to success with the provider's
// pending refund ref.
func (f *fixture) succeededRefund(t *testing.T, order, ref string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund(order, 4200), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	ok := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: ref, Body: []byte(`{"id":"` + ref + `","status":"pending"}`)}}
	})
	op, err := f.ledger.Run(ctx, o.Op, ok, ops.RunSpec{Owner: "w", First: o.Attempt})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("refund: %+v (%v)", op, err)
	}
	return op
}

// failedAfterSuccessSummary is the summary of op's failed-after-success exception.
func (f *fixture) failedAfterSuccessSummary(t *testing.T, op *ops.Operation) string {
	t.Helper()
	var s string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT summary FROM recon_exceptions
WHERE kind = 'failed_after_success' AND operation_id = $1`, op.ID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFailedAfterSuccessSaysOnlyWhatIsKnownOfTheOperationsMoney defends ops rule 12: when
// the refund an operation succeeded with fails later, its exception says that this refund
// moved no money. Whether the customer got money back is another sentence: another refund
// of the same operation (a double refund, or one made by hand with the operation's id) that
// Settle holds as having moved money is named in the summary, and with none known the
// summary says only that Settle knows of none, never that no money moved.
func TestFailedAfterSuccessSaysOnlyWhatIsKnownOfTheOperationsMoney(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	ev := ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated"}
	doubled := f.succeededRefund(t, "fas-double", "re_first")
	second := ops.ProviderRecord{Provider: "stripe", Ref: "re_second", OperationID: doubled.ID, AmountCents: 4200,
		Currency: "usd", Status: "succeeded", Created: t0}
	if a, err := f.ledger.ApplyRecord(ctx, f.db, second, ev, "stripe reconciliation"); err != nil || a.Outcome != "already_closed" {
		t.Fatalf("the second refund: %+v (%v)", a, err)
	}
	lone := f.succeededRefund(t, "fas-lone", "re_lone")
	for _, c := range []struct {
		op  *ops.Operation
		ref string
	}{{doubled, "re_first"}, {lone, "re_lone"}} {
		failed := ops.ProviderRecord{Provider: "stripe", Ref: c.ref, OperationID: c.op.ID, AmountCents: 4200, Currency: "usd",
			Status: "failed", Created: t0}
		if a, err := f.ledger.ApplyRecord(ctx, f.db, failed, ev, "webhook"); err != nil || a.Outcome != "failed_after_success" {
			t.Fatalf("%s failed: %+v (%v)", c.ref, a, err)
		}
	}
	got := f.failedAfterSuccessSummary(t, doubled)
	if strings.Contains(got, "no money moved") || !strings.Contains(got, "re_second") {
		t.Errorf("with another refund that moved money the summary reads %q; want it to name re_second, not that no money moved", got)
	}
	got = f.failedAfterSuccessSummary(t, lone)
	if strings.Contains(got, "no money moved") || !strings.Contains(got, "moved no money") {
		t.Errorf("with no other refund known the summary reads %q; want only that this refund moved no money", got)
	}
}
