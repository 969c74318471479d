package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestAdmitAnswersAConflictAsAVerdict: the same intent with other parameters is a verdict of
// admission, answered and recorded as a conflict, not a failure of admission (ops rule 8):
// a caller that reads the error alone must not take it for an outage or a refusal that
// sent nothing.
func TestAdmitAnswersAConflictAsAVerdict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.refund("ord_conflict", 500)
	in.RequestRef, in.Owner = "req-1", "worker-a"
	first, err := f.ledger.Admit(ctx, in)
	if err != nil || first.Verdict != ops.VerdictSend {
		t.Fatalf("first admission: %+v %v", first, err)
	}
	other := in
	other.Fingerprint, other.RequestRef, other.Owner = "fp-other", "req-2", "worker-b"
	adm, err := f.ledger.Admit(ctx, other)
	if err != nil {
		t.Fatalf("a conflict came with an error: %v", err)
	}
	if adm.Verdict != ops.VerdictConflict || adm.Op == nil || adm.Op.ID != first.Op.ID {
		t.Fatalf("admission of other parameters: %+v", adm)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE id = $1 AND answer = 'conflict'`, adm.ClientRequestID); n != 1 {
		t.Fatalf("the conflicting request is not answered as a conflict")
	}
}

// TestAdmitRecordsTheInProgressAnswer: a request that finds its intent being sent by another
// is answered in_progress by admission itself, so no caller can forget to count it
// (ops rule 8).
func TestAdmitRecordsTheInProgressAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.refund("ord_busy", 700)
	in.RequestRef, in.Owner = "req-1", "worker-a"
	if first, err := f.ledger.Admit(ctx, in); err != nil || first.Verdict != ops.VerdictSend {
		t.Fatalf("first admission: %+v %v", first, err)
	}
	again := in
	again.RequestRef, again.Owner = "req-2", "worker-b"
	adm, err := f.ledger.Admit(ctx, again)
	if err != nil || adm.Verdict != ops.VerdictInFlight || adm.ClientRequestID == 0 {
		t.Fatalf("second admission: %+v %v", adm, err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE id = $1 AND answer = 'in_progress'`, adm.ClientRequestID); n != 1 {
		t.Fatalf("admission left the in-flight request unanswered")
	}
}

// TestAdmitReplayOnlyAnswersFromAStoredSuccess: a request that may only reuse a stored
// result (a pipeline job's reuse path) is admitted to the intent's success and answered
// replayed; without one it opens nothing, sends nothing and records no request
// (ops rules 2 and 8).
func TestAdmitReplayOnlyAnswersFromAStoredSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.refund("ord_reuse", 900)
	in.RequestRef, in.Owner = "req-1", "worker-a"
	reuse := in
	reuse.RequestRef, reuse.Owner, reuse.ReplayOnly = "req-reuse", "", true
	if adm, err := f.ledger.Admit(ctx, reuse); ops.ErrorCode(err) != ops.ENOTFOUND || adm.Op != nil {
		t.Fatalf("reuse of an intent never seen: %+v %v, want ENOTFOUND", adm, err)
	}
	first, err := f.ledger.Admit(ctx, in)
	if err != nil || first.Verdict != ops.VerdictSend {
		t.Fatalf("first admission: %+v %v", first, err)
	}
	if adm, err := f.ledger.Admit(ctx, reuse); ops.ErrorCode(err) != ops.ENOTFOUND || adm.Op != nil {
		t.Fatalf("reuse of an intent in flight: %+v %v, want ENOTFOUND", adm, err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'req-reuse'`); n != 0 {
		t.Fatalf("a reuse that found nothing recorded %d requests", n)
	}
	ok := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, Result: &ops.Result{ProviderRef: "re_reuse", Body: []byte(`{}`)}}
	})
	if op, err := f.ledger.Run(ctx, first.Op, ok, ops.RunSpec{Owner: "worker-a", First: first.Attempt}); err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("run: %+v %v", op, err)
	}
	adm, err := f.ledger.Admit(ctx, reuse)
	if err != nil || adm.Verdict != ops.VerdictReplay || adm.Op.ID != first.Op.ID {
		t.Fatalf("reuse of a success: %+v %v", adm, err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'req-reuse' AND answer = 'replayed' AND operation_id = $1`, first.Op.ID); n != 1 {
		t.Fatalf("the reuse is not recorded as a replay of the success")
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, first.Op.ID); n != 1 {
		t.Fatalf("%d attempts, want the one send", n)
	}
}

// TestAdmitRecordsARequestWhoseDeadlinePassedDuringAdmission: a request whose caller's
// deadline passes while admission reads the intent's newest operation (a database slowed by
// load, a short client deadline) opened and joined nothing, yet it reached the ledger: it is
// recorded as refused, as every refusal is, on a context of its own (ops rule 8). Before,
// the read's error went back to the caller and no client request was recorded.
func TestAdmitRecordsARequestWhoseDeadlinePassedDuringAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.refund("ord_late", 900)
	in.RequestRef, in.Owner = "req-late", "worker-a"
	// A check makes admission read the newest operation before it opens one.
	in.Check = func(context.Context) error { return nil }
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := f.ledger.Admit(ctx, in); err == nil {
		t.Fatal("an admission whose deadline had passed went through")
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'req-late' AND answer = 'rejected'`); n != 1 {
		t.Fatalf("the request cut by its deadline is recorded %d times as refused, want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE intent_key = $1`, in.IntentKey); n != 0 {
		t.Fatalf("the request cut by its deadline opened %d operations", n)
	}
}
