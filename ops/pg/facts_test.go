package pg_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// lifecycle opens a refund leased to w1 and runs it against a provider that answers at
// once, as the write-path benchmark does.
func (f *fixture) lifecycle(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund(order, 3800), "req-"+order, "w1")
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
	tl, err := deskstore.New(f.db).Timeline(ctx, op.ID)
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
	if tl, err = deskstore.New(f.db).Timeline(ctx, op.ID); err != nil || len(tl.Evidence) != 2 || tl.Evidence[0].Kind != ops.EvidenceProviderResponse ||
		tl.Evidence[1].Kind != "note" {
		t.Errorf("timeline evidence %+v (%v), want the response then the note", tl.Evidence, err)
	}
}

// ops rule 6: an operation's opening is in its audit trail, read from the operation's own
// creation instead of a row that repeats it.
func TestOpenIsAuditedFromTheOperationsCreation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-audit")
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, op.ID); n != 0 {
		t.Errorf("%d audit rows, want none: the attempt's finish is read from the attempt", n)
	}
	tl, err := deskstore.New(f.db).Timeline(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Audit) != 2 || tl.Audit[1].Action != "attempt.ok" {
		t.Fatalf("timeline audit %+v, want open then attempt.ok", tl.Audit)
	}
	open := tl.Audit[0]
	var after struct {
		Status  string
		Version int64
	}
	if err := json.Unmarshal(open.After, &after); err != nil {
		t.Fatal(err)
	}
	if open.Action != "open" || open.Actor != "w1" || !open.At.Equal(t0) || open.Entity != "operation" || open.EntityID != op.ID ||
		after.Status != "in_progress" || after.Version != 1 {
		t.Errorf("open entry %+v after %+v", open, after)
	}

	// An intent opened without a claim was received by nobody in particular.
	f.clock.Advance(time.Second)
	o, err := f.seed().Open(ctx, f.refund("ord-unclaimed", 100), "req-u", "")
	if err != nil {
		t.Fatal(err)
	}
	tl, err = deskstore.New(f.db).Timeline(ctx, o.Op.ID)
	if err != nil || len(tl.Audit) != 1 || tl.Audit[0].Action != "open" || tl.Audit[0].Actor != "" ||
		string(tl.Audit[0].After) != `{"status": "received", "version": 1}` {
		t.Fatalf("unclaimed open's audit %+v (%v)", tl.Audit, err)
	}

	// The audit log page lists openings with the rest, newest first, and by their action.
	page, err := deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{EntityID: op.ID})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Action != "attempt.ok" || page.Entries[1].Action != "open" {
		t.Fatalf("audit page for the operation %+v (%v)", page.Entries, err)
	}
	page, err = deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{Action: "open"})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].EntityID != o.Op.ID || page.Entries[1].EntityID != op.ID {
		t.Fatalf("audit page of openings %+v (%v)", page.Entries, err)
	}
	// Filtering by actor asks what someone did; an opening is the process's that took the
	// request, and an attempt's finish the process's that sent it: both are left to the
	// timeline and the action's filter.
	page, err = deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{Actor: "w1"})
	if err != nil || len(page.Entries) != 0 {
		t.Fatalf("audit page of w1 %+v (%v)", page.Entries, err)
	}
	// One entry a page walks the whole log by its cursor, each entry once.
	seen := map[string]int{}
	var after0 *desk.AuditCursor
	for range 10 {
		page, err = deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{Limit: 1, After: after0})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[e.Action+" "+e.EntityID]++
		}
		if after0 = page.Next; after0 == nil {
			break
		}
	}
	if len(seen) != 3 || seen["open "+op.ID] != 1 || seen["attempt.ok "+op.ID] != 1 || seen["open "+o.Op.ID] != 1 {
		t.Errorf("paging one entry at a time saw %v", seen)
	}
}

// An operation opened when its opening was an audit row of its own (as Open wrote it
// before) shows one opening, read from the operation like any other; and the "open"
// filter of the audit log page reads the operations alone, not the whole log for rows
// that no longer come.
func TestOpeningsWithAnOldRowAreListedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-old")
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, after)
VALUES ($1, 'w1', 'open', 'operation', $2, '{"status": "in_progress", "version": 1}')`, t0, op.ID); err != nil {
		t.Fatal(err)
	}
	tl, err := deskstore.New(f.db).Timeline(ctx, op.ID)
	if err != nil || len(tl.Audit) != 2 || tl.Audit[0].Action != "open" || tl.Audit[1].Action != "attempt.ok" {
		t.Fatalf("timeline audit %+v (%v), want one opening then attempt.ok", tl.Audit, err)
	}
	page, err := deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{})
	if err != nil || len(page.Entries) != 2 {
		t.Fatalf("audit page %+v (%v), want the attempt and one opening", page.Entries, err)
	}
	// That the "open" filter reads no audit row is checked on its plan by deskstore's
	// TestTheOpeningsPageReadsNoAuditLog.
}
