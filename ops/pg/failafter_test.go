package pg_test

import (
	"context"
	"errors"
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
