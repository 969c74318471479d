package pg_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// lifecycle opens a refund leased to w1 and runs it against a provider that answers at
// once, as the write-path benchmark does.
func (f *fixture) lifecycle(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.ledger.Open(ctx, f.refund(order, 3800), "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	ok := ops.SenderFunc(func(_ context.Context, op *ops.Operation, _ *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_" + op.ID,
			Result: &ops.Result{ProviderRef: "re_" + order}}
	})
	op, err := f.ledger.Run(ctx, o.Op, ok, ops.RunSpec{Owner: "w1", First: o.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusSucceeded {
		t.Fatalf("status %s, want succeeded", op.Status)
	}
	return op
}

// ops rule 9: the provider's direct answer is the success's evidence. It is recorded once,
// on the attempt it answered, and the timeline shows it as the provider's response.
func TestDirectAnswerIsEvidenceReadFromItsAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-ev")
	if n := f.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1`, op.ID); n != 0 {
		t.Errorf("%d evidence rows repeat the attempt's answer, want 0", n)
	}
	tl, err := f.db.Timeline(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Evidence) != 1 {
		t.Fatalf("timeline evidence %+v, want the provider's response", tl.Evidence)
	}
	e := tl.Evidence[0]
	if e.Kind != ops.EvidenceProviderResponse || e.ProviderRef != "re_ord-ev" || e.RecordedBy != "w1" ||
		!e.RecordedAt.Equal(t0) || e.OperationID != op.ID || e.Summary != "The provider answered the attempt with re_ord-ev." {
		t.Errorf("evidence %+v", e)
	}
	// A person's evidence beside it is still its own row, and both are shown.
	f.clock.Advance(ops.DefaultLimits.Lease)
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO evidence (operation_id, kind, provider_ref, summary, recorded_by, recorded_at)
VALUES ($1, 'note', '', 'customer called', 'ann@example.com', $2)`, op.ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if tl, err = f.db.Timeline(ctx, op.ID); err != nil || len(tl.Evidence) != 2 || tl.Evidence[0].Kind != ops.EvidenceProviderResponse ||
		tl.Evidence[1].Kind != "note" {
		t.Errorf("timeline evidence %+v (%v), want the response then the note", tl.Evidence, err)
	}
}
