package recon_test

import (
	"context"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/stripe"
)

func TestExceptionWorkflowAndItsAudit(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	orphan := w.outsideRefund(t, 1500, nil)
	if _, err := w.recon.Reconcile(ctx, "stripe", w.window()); err != nil {
		t.Fatal(err)
	}
	list, err := reconstore.New(w.db).ListExceptions(ctx, recon.ExceptionFilter{Status: recon.ExceptionOpen})
	if err != nil || len(list) != 1 || list[0].Ref != orphan.ID {
		t.Fatalf("open exceptions: %+v (%v)", list, err)
	}
	ex := list[0]
	change := func(c recon.ExceptionChange) (*recon.Exception, error) {
		c.ID, c.At = ex.ID, w.clock.Now()
		if c.Actor == "" {
			c.Actor = "ana@example.com"
		}
		return recon.ChangeException(ctx, reconstore.New(w.db), c)
	}

	got, err := change(recon.ExceptionChange{Version: ex.Version, Action: recon.ActionAcknowledge})
	if err != nil || got.Status != recon.ExceptionAcknowledged || got.Assignee != "ana@example.com" {
		t.Fatalf("acknowledge: %+v (%v)", got, err)
	}
	if _, err := change(recon.ExceptionChange{Version: ex.Version, Action: recon.ActionAssign, Assignee: "bo@example.com"}); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("a change on the old version: %v, want conflict", err)
	}
	got, err = change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionAssign, Assignee: "bo@example.com"})
	if err != nil || got.Assignee != "bo@example.com" {
		t.Fatalf("assign: %+v (%v)", got, err)
	}
	if _, err := change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionResolve, Note: "   "}); ops.ErrorReason(err) != "note_required" {
		t.Fatalf("resolve without a note: %v, want note_required", err)
	}
	// Two people resolve at once: one wins, the other is told to reload.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionResolve, Actor: "person" + strconv.Itoa(i),
				Note: "Refund made by support in the Stripe dashboard; agreed with the customer."})
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent resolves: %v / %v, want exactly one to win", errs[0], errs[1])
	}
	for _, e := range errs {
		if e != nil && ops.ErrorCode(e) != ops.ECONFLICT {
			t.Fatalf("the loser got %v, want conflict", e)
		}
	}
	got, _ = reconstore.New(w.db).GetException(ctx, ex.ID)
	if got.Status != recon.ExceptionResolved || got.ResolvedAt == nil || got.Note == "" {
		t.Fatalf("after resolve: %+v", got)
	}
	// The reconciler sees the same orphan again: a resolved exception stays resolved, and a
	// person's version stays valid.
	w.clock.Advance(time.Minute)
	rep, err := w.recon.Reconcile(ctx, "stripe", recon.Window{From: w.clock.Now().Add(-time.Hour), To: w.clock.Now()})
	if err != nil || rep.NewExceptions != 0 {
		t.Fatalf("rerun: %+v (%v)", rep, err)
	}
	again, _ := reconstore.New(w.db).GetException(ctx, ex.ID)
	if again.Status != recon.ExceptionResolved || again.Version != got.Version || again.SeenCount != 2 {
		t.Fatalf("after rerun: %s v%d seen %d", again.Status, again.Version, again.SeenCount)
	}
	if _, err := change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionReopen}); ops.ErrorReason(err) != "note_required" {
		t.Fatalf("reopen without a note: %v", err)
	}
	got, err = change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionReopen, Note: "Support denies making it."})
	if err != nil || got.Status != recon.ExceptionOpen || got.ResolvedAt != nil {
		t.Fatalf("reopen: %+v (%v)", got, err)
	}
	got, err = change(recon.ExceptionChange{Version: got.Version, Action: recon.ActionSeverity, Severity: recon.SeverityCritical})
	if err != nil || got.Severity != recon.SeverityCritical {
		t.Fatalf("severity: %+v (%v)", got, err)
	}

	audit, err := reconstore.New(w.db).Audit(ctx, "recon_exception", strconv.FormatInt(ex.ID, 10))
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	want := []string{"open", "acknowledge", "assign", "resolve", "reopen", "severity"}
	if len(actions) != len(want) {
		t.Fatalf("audit %v, want %v", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("audit %v, want %v", actions, want)
		}
	}
	if audit[3].Reason == "" || len(audit[3].Before) == 0 || len(audit[3].After) == 0 {
		t.Fatalf("the resolve audit row lacks its note or states: %+v", audit[3])
	}
}

func TestResolvedDoubleChargeReopensOnAThirdCharge(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.succeeded(t, "500", 1000)
	w.outsideRefund(t, 1000, map[string]string{stripe.MetadataKey: op.ID})
	if _, err := w.recon.Reconcile(ctx, "stripe", w.window()); err != nil {
		t.Fatal(err)
	}
	list, _ := reconstore.New(w.db).ListExceptions(ctx, recon.ExceptionFilter{Kind: recon.ExceptionDoubleCharge})
	if len(list) != 1 {
		t.Fatalf("%d double charges", len(list))
	}
	ex := list[0]
	if _, err := recon.ChangeException(ctx, reconstore.New(w.db), recon.ExceptionChange{ID: ex.ID, Version: ex.Version, Action: recon.ActionResolve,
		Actor: "ana@example.com", Note: "Customer keeps the second refund as goodwill.", At: w.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	third := w.outsideRefund(t, 1000, map[string]string{stripe.MetadataKey: op.ID})
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil || rep.NewExceptions != 0 || rep.DoubleCharges != 1 {
		t.Fatalf("run: %+v (%v)", rep, err)
	}
	got, _ := reconstore.New(w.db).GetException(ctx, ex.ID)
	if got.Status != recon.ExceptionOpen || len(got.ChargeRefs) != 3 || !contains(got.ChargeRefs, third.ID) || got.AmountCents != 2000 {
		t.Fatalf("after a third charge: %s %v %d", got.Status, got.ChargeRefs, got.AmountCents)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE entity = 'recon_exception' AND action = 'reopen'`); n != 1 {
		t.Fatalf("%d reopen audit rows", n)
	}
}
