package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// trailOf returns the audit entries of op's timeline.
func (f *fixture) trailOf(t *testing.T, opID string) []desk.AuditLogEntry {
	t.Helper()
	tl, err := deskstore.New(f.db).Timeline(context.Background(), opID)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Audit
}

// sameEntry says whether a and b show the same change, apart from the time, the id and
// the operation they belong to.
func sameEntry(a, b desk.AuditLogEntry) bool {
	return a.Actor == b.Actor && a.Action == b.Action && a.Entity == b.Entity && string(a.Before) == string(b.Before) &&
		string(a.After) == string(b.After) && a.Reason == b.Reason && a.EvidenceID == b.EvidenceID
}

// ops rule 6: an attempt's finish by the process that sent it changes its operation and is
// audited, but on the attempt's own row: the lifecycle writes no audit row, and the timeline
// and every filter of the audit page list the finish with the before and after an audit
// row of it showed, in its place.
func TestAnAttemptsFinishIsAuditedOnTheAttemptWithoutARow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-fin")
	if n := f.count(t, `SELECT count(*) FROM audit_log`); n != 0 {
		t.Errorf("a refund lifecycle wrote %d audit rows, want none: its attempt's finish is on the attempt", n)
	}
	trail := f.trailOf(t, op.ID)
	if len(trail) != 2 || trail[0].Action != "open" {
		t.Fatalf("trail %+v, want open then attempt.ok", trail)
	}
	fin := trail[1]
	if fin.Action != "attempt.ok" || fin.Actor != "w1" || !fin.At.Equal(t0) || fin.Entity != "operation" || fin.EntityID != op.ID ||
		fin.ID <= 0 || fin.EvidenceID != 0 || fin.Reason != "attempt ok" ||
		string(fin.Before) != `{"status": "in_progress", "version": 1}` ||
		string(fin.After) != `{"phase": "`+string(op.Phase)+`", "status": "succeeded", "version": 2}` {
		t.Errorf("finish entry %+v before %s after %s", fin, fin.Before, fin.After)
	}

	// A finish later than the window of its start writes its audit row, as every finish
	// did before; the entry read from the attempt is the row's twin.
	f.clock.Advance(time.Hour)
	late := f.lateLifecycle(t, "ord-late")
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, late.ID); n != 1 {
		t.Errorf("the late finish wrote %d audit rows, want 1", n)
	}
	lateTrail := f.trailOf(t, late.ID)
	if len(lateTrail) != 2 || !sameEntry(lateTrail[1], fin) {
		t.Errorf("late trail %+v, want open then a row like %+v", lateTrail, fin)
	}

	store := deskstore.New(f.db)
	page, err := store.AuditLog(ctx, desk.AuditFilter{})
	if err != nil || len(page.Entries) != 4 || page.Entries[0].EntityID != late.ID || page.Entries[2].ID != fin.ID || !sameEntry(page.Entries[2], fin) || page.Entries[3].Action != "open" {
		t.Fatalf("audit page %+v (%v), want the late lifecycle's two entries, then the finish and its opening", page.Entries, err)
	}
	for _, c := range []struct {
		name string
		f    desk.AuditFilter
		want []string
	}{
		{"action", desk.AuditFilter{Action: "attempt.ok"}, []string{late.ID, op.ID}},
		{"another outcome", desk.AuditFilter{Action: "attempt.timeout"}, nil},
		{"operation", desk.AuditFilter{EntityID: op.ID}, []string{op.ID, op.ID}},
		{"time", desk.AuditFilter{From: t0, To: t0.Add(time.Minute)}, []string{op.ID, op.ID}},
		{"after the finish", desk.AuditFilter{From: t0.Add(time.Microsecond), To: t0.Add(time.Minute)}, nil},
		{"cursor", desk.AuditFilter{After: &desk.AuditCursor{At: fin.At, ID: fin.ID + 1}}, []string{op.ID, op.ID}},
		{"cursor at the finish", desk.AuditFilter{After: &desk.AuditCursor{At: fin.At, ID: fin.ID}}, []string{op.ID}},
		// The actor filter asks what someone did: a process's finishes, like its openings,
		// are left to the timeline and the action's filter; the late finish's row is read.
		{"actor", desk.AuditFilter{Actor: "w1"}, []string{late.ID}},
	} {
		page, err := store.AuditLog(ctx, c.f)
		var got []string
		for _, e := range page.Entries {
			got = append(got, e.EntityID)
		}
		if err != nil || len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, c.want)
		}
	}
	// One entry a page walks the whole log by its cursor, each entry once.
	seen := map[int64]int{}
	var after *desk.AuditCursor
	for range 10 {
		page, err := store.AuditLog(ctx, desk.AuditFilter{Limit: 1, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[e.ID]++
		}
		if after = page.Next; after == nil {
			break
		}
	}
	if len(seen) != 4 || seen[fin.ID] != 1 {
		t.Errorf("paging one entry at a time saw %v", seen)
	}
}

// lateLifecycle is lifecycle with a provider that answers past pg.FinishAuditWindow.
func (f *fixture) lateLifecycle(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund(order, 3800), "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	slow := ops.SenderFunc(func(_ context.Context, op *ops.Operation, _ *ops.Attempt) ops.AttemptResult {
		f.clock.Advance(pg.FinishAuditWindow + time.Second)
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_" + op.ID,
			Result: &ops.Result{ProviderRef: "re_" + order}}
	})
	op, err := f.ledger.Run(ctx, o.Op, slow, ops.RunSpec{Owner: "w1", First: o.Attempt})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("late lifecycle: %v %v", op, err)
	}
	return op
}

// ops rule 6: attempts that went on in progress, and the audit rows of other changes between
// them, keep their order in the trail; a finish recorded before the attempts held it keeps
// its row and is listed once.
func TestAttemptFinishesKeepTheirPlaceInTheTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("ord-retry", 100), "req-retry", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
	if err != nil || op.Status != ops.StatusInProgress {
		t.Fatalf("after the timeout: %v %v", op, err)
	}
	// Another change between the finish and the next: a row of its own.
	if op, err = f.db.Transition(ctx, ops.TransitionParams{ID: op.ID, Version: op.Version, From: op.Status, To: ops.StatusUnknown,
		Now: f.clock.Now(), Actor: "ann@example.com", Action: "mark_unknown", Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	trail := f.trailOf(t, op.ID)
	var actions []string
	for _, e := range trail {
		actions = append(actions, e.Action)
	}
	if len(trail) != 3 || actions[1] != "attempt.timeout" || actions[2] != "mark_unknown" || trail[1].ID >= trail[2].ID ||
		trail[1].Reason != "" || string(trail[1].After) != `{"phase": "`+string(trail1Phase(t, f, op.ID))+`", "status": "in_progress", "version": 2}` {
		t.Fatalf("trail %v %+v", actions, trail)
	}
	// The same finish as it was recorded before: an audit row, and no entry on the attempt.
	if _, err := f.db.Pool.Exec(ctx, `
WITH a AS (UPDATE attempts SET audit_id = NULL, op_status = NULL, op_version = NULL, op_phase = NULL WHERE operation_id = $1)
INSERT INTO audit_log (id, at, actor, action, entity, entity_id, before, after, reason) OVERRIDING SYSTEM VALUE
VALUES ($7, $2, $3, $4, 'operation', $1, $5, $6, '')`, op.ID, trail[1].At, trail[1].Actor, trail[1].Action, trail[1].Before, trail[1].After, trail[1].ID); err != nil {
		t.Fatal(err)
	}
	again := f.trailOf(t, op.ID)
	if len(again) != 3 || !sameEntry(again[1], trail[1]) || again[2].Action != "mark_unknown" {
		t.Errorf("trail with the old row %+v, want it once", again)
	}
	page, err := deskstore.New(f.db).AuditLog(ctx, desk.AuditFilter{Action: "attempt.timeout"})
	if err != nil || len(page.Entries) != 1 {
		t.Errorf("timeouts page %+v (%v), want the one row", page.Entries, err)
	}
}

// trail1Phase is the phase the operation kept after its first attempt's finish.
func trail1Phase(t *testing.T, f *fixture, opID string) string {
	t.Helper()
	var phase string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT op_phase FROM attempts WHERE operation_id = $1 AND n = 1`, opID).Scan(&phase); err != nil {
		t.Fatal(err)
	}
	return phase
}

// Migration 00076 rolled back writes each finish the attempts hold as the audit row it stands
// for, with its id, so the trail reads the same before and after (ops rule 6); applied again,
// the finish is listed once, from its row.
func TestFinishAuditMigrationDownWritesTheRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-down")
	want := f.trailOf(t, op.ID)
	if err := f.db.MigrateDownTo(ctx, 75); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'attempt.ok'`, op.ID); n != 1 {
		t.Fatalf("%d rows of the finish after the rollback, want 1", n)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.trailOf(t, op.ID)
	if len(got) != len(want) {
		t.Fatalf("trail after down and up %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].At.Equal(want[i].At) || !sameEntry(got[i], want[i]) {
			t.Errorf("entry %d after down and up %+v, want %+v", i, got[i], want[i])
		}
	}
}

// ops rule 6: a dead process's attempt finished by the client call that takes its operation
// over is audited as that call's act: within the window on the attempt (finished_by), later
// as a row of its own.
func TestATakenOverAttemptsFinishNamesWhoFinishedIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, c := range []struct {
		order string
		wait  time.Duration
		rows  int
	}{{"taken-soon", ops.DefaultLimits.Lease + time.Second, 0}, {"taken-late", 2 * time.Minute, 1}} {
		o, err := f.seed().Open(ctx, f.refund(c.order, 100), "r1-"+c.order, "dead-worker")
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(c.wait)
		a, err := f.ledger.Admit(ctx, request(f.refund(c.order, 100), "r2-"+c.order, "call-2"))
		if err != nil || a.Op.ID != o.Op.ID {
			t.Fatalf("%s: takeover %+v %v", c.order, a, err)
		}
		trail := f.trailOf(t, o.Op.ID)
		var got []string
		for _, e := range trail {
			got = append(got, e.Actor+" "+e.Action)
		}
		if len(got) < 2 || got[0] != "dead-worker open" || got[len(got)-1] != "call-2 attempt.timeout" {
			t.Errorf("trail of %s: %v, want the opening, then call-2's finish of the attempt last", c.order, got)
		}
		if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'attempt.timeout'`, o.Op.ID); n != c.rows {
			t.Errorf("%s: %d audit rows of the finish, want %d", c.order, n, c.rows)
		}
	}
}

// A refund lifecycle (Admit, then one attempt the provider answers) inserts four rows: the
// operation, its client request, its attempt and the provider's charge. Its audit entries,
// the opening and the attempt's finish, and the success's evidence are read from those rows
// (ops rules 6 and 9); a fifth row is a fact written twice. The write-path benchmark
// (BenchmarkWritePath) counts the same: 4 heap inserts a lifecycle.
func TestARefundLifecycleInsertsFourRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.lifecycle(t, "ord-rows")
	got := map[string]int{}
	total := 0
	for _, table := range []string{"operations", "client_requests", "attempts", "provider_charges", "evidence", "audit_log", "outbox"} {
		got[table] = f.count(t, `SELECT count(*) FROM `+table)
		total += got[table]
	}
	if total != 4 || got["audit_log"] != 0 || got["evidence"] != 0 {
		t.Errorf("a lifecycle of %s inserted %v, want one operation, client request, attempt and charge", op.ID, got)
	}
}
