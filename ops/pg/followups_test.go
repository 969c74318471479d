package pg_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// watcher adds a dashboard user who follows op, and returns the user's id.
func (f *fixture) watcher(t *testing.T, email string, op *ops.Operation) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'support') RETURNING id`,
		email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	created, err := deskstore.New(f.db).AddFollowUp(ctx, id, op.ID, f.clock.Now())
	if err != nil || !created {
		t.Fatalf("follow: created %v, %v", created, err)
	}
	return id
}

// assertSettledWithClose checks that op's close settled the user's follow-up and wrote one
// notification per channel, all in the transaction that wrote the close: the rows' xmin
// (the id of the transaction that wrote them) is the operation row's.
func (f *fixture) assertSettledWithClose(t *testing.T, op *ops.Operation, user int64, want ops.Status) {
	t.Helper()
	ctx := context.Background()
	var opTx, fuTx, outcome string
	if err := f.db.Pool.QueryRow(ctx, `SELECT o.xmin::text, f.xmin::text, coalesce(f.outcome, '')
FROM operations o JOIN follow_ups f ON f.operation_id = o.id WHERE o.id = $1 AND f.user_id = $2`, op.ID, user).
		Scan(&opTx, &fuTx, &outcome); err != nil {
		t.Fatal(err)
	}
	if outcome != string(want) {
		t.Fatalf("follow-up outcome %q, want %s", outcome, want)
	}
	if fuTx != opTx {
		t.Fatalf("follow-up settled in transaction %s, the close in %s", fuTx, opTx)
	}
	if n := f.count(t, `SELECT count(*) FROM follow_up_outbox n JOIN follow_ups f ON f.id = n.follow_up_id
WHERE f.operation_id = $1 AND f.user_id = $2 AND n.xmin::text = $3`, op.ID, user, opTx); n != 2 {
		t.Fatalf("%d notifications written with the close, want one per channel (2)", n)
	}
	if n := f.count(t, `SELECT count(*) FROM follow_up_outbox n JOIN follow_ups f ON f.id = n.follow_up_id
WHERE f.operation_id = $1 AND n.payload->>'outcome' = $2 AND n.payload->>'watcher_email' <> ''
	AND n.payload->>'event_id' = n.event_id::text`, op.ID, string(want)); n != 2 {
		t.Fatalf("%d notifications carry the outcome, the watcher's email and their event id, want 2", n)
	}
}

func TestEveryClosePathSettlesFollowUpsInTheCloseTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	t.Run("a person's close", func(t *testing.T) {
		op := f.toUnknown(t, "p-1")
		u := f.watcher(t, "person@example.com", op)
		f.clock.Advance(time.Minute)
		if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
			Actor: "oncall@example.com", Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_p1", Summary: "seen in Stripe"}}); err != nil {
			t.Fatal(err)
		}
		f.assertSettledWithClose(t, op, u, ops.StatusSucceeded)
	})
	t.Run("a lookup or the reconciler", func(t *testing.T) {
		op := f.toUnknown(t, "p-2")
		u := f.watcher(t, "lookup@example.com", op)
		f.clock.Advance(time.Minute)
		rec := ops.ProviderRecord{Provider: "stripe", Ref: "re_p2", OperationID: op.ID, AmountCents: 3800, Currency: "usd",
			Status: "succeeded", Created: f.clock.Now()}
		got, err := f.ledger.ApplyRecord(ctx, f.db, rec, ops.Evidence{Kind: ops.EvidenceReconciliation, Summary: "listed"}, "reconciler")
		if err != nil || got.Outcome != "closed" {
			t.Fatalf("apply record: %+v, %v", got, err)
		}
		f.assertSettledWithClose(t, op, u, ops.StatusSucceeded)
	})
	t.Run("a worker's attempt", func(t *testing.T) {
		o, err := f.seed().Open(ctx, f.refund("p-3", 3800), "req-3", "w1")
		if err != nil {
			t.Fatal(err)
		}
		u := f.watcher(t, "worker@example.com", o.Op)
		refused := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
			return ops.AttemptResult{Outcome: ops.OutcomeInvalid, HTTPStatus: 400}
		})
		if _, err := f.ledger.Run(ctx, o.Op, refused, ops.RunSpec{Owner: "w1", First: o.Attempt}); err != nil {
			t.Fatal(err)
		}
		f.assertSettledWithClose(t, o.Op, u, ops.StatusFailed)
	})
	t.Run("a webhook", func(t *testing.T) {
		op := f.toUnknown(t, "p-4")
		u := f.watcher(t, "webhook@example.com", op)
		rec := ops.ProviderRecord{Provider: "stripe", Ref: "re_p4", OperationID: op.ID, AmountCents: 3800, Currency: "usd",
			Status: "succeeded", Created: f.clock.Now()}
		got, err := f.ledger.ApplyEvent(ctx, f.db, ops.ProviderEvent{Provider: "stripe", ID: "evt_p4", Type: "refund.created",
			Record: &rec, ReceivedAt: f.clock.Now()})
		if err != nil || got.Outcome != "closed" {
			t.Fatalf("apply event: %+v, %v", got, err)
		}
		f.assertSettledWithClose(t, op, u, ops.StatusSucceeded)
	})
}

func TestAFailedNotificationWriteUndoesTheClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	op := f.toUnknown(t, "atomic")
	f.watcher(t, "atomic@example.com", op)
	if _, err := f.db.Pool.Exec(ctx, `
CREATE FUNCTION refuse_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'notifications refused'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON follow_up_outbox FOR EACH ROW EXECUTE FUNCTION refuse_notifications();`); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	_, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		Actor: "oncall@example.com", Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_at", Summary: "seen"}})
	if err == nil {
		t.Fatal("the close went through although its notification could not be written")
	}
	cur, err := f.db.Get(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status != ops.StatusUnknown {
		t.Fatalf("status %s after the close failed, want unknown", cur.Status)
	}
	if n := f.count(t, `SELECT count(*) FROM follow_ups WHERE operation_id = $1 AND settled_at IS NULL`, op.ID); n != 1 {
		t.Fatalf("%d waiting follow-ups, want 1", n)
	}
}

// TestFollowRacingACloseIsSettledOrRefused: a person presses the button while the operation
// is being closed. Either the follow is refused as closed, or the follow-up is settled by
// the close; it never waits forever.
func TestFollowRacingACloseIsSettledOrRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	var user int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ('race@example.com', 'x', 'support') RETURNING id`).
		Scan(&user); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		op := f.toUnknown(t, "race-"+strconv.Itoa(i))
		var followErr error
		var created bool
		var wg sync.WaitGroup
		wg.Go(func() { created, followErr = deskstore.New(f.db).AddFollowUp(ctx, user, op.ID, f.clock.Now()) })
		wg.Go(func() {
			if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
				Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_race", Summary: "seen"}}); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		waiting := f.count(t, `SELECT count(*) FROM follow_ups WHERE operation_id = $1 AND settled_at IS NULL`, op.ID)
		switch {
		case waiting != 0:
			t.Fatalf("round %d: a follow-up of a closed operation waits forever", i)
		case followErr == nil && created:
			if n := f.count(t, `SELECT count(*) FROM follow_up_outbox n JOIN follow_ups u ON u.id = n.follow_up_id WHERE u.operation_id = $1`, op.ID); n != 2 {
				t.Fatalf("round %d: settled with %d notifications, want 2", i, n)
			}
		case ops.ErrorCode(followErr) != ops.ECONFLICT:
			t.Fatalf("round %d: follow answered %v, %v", i, created, followErr)
		}
	}
}

// TestACloseThatWaitedForAFollowSettlesIt pins the case the trigger exists for: a follow
// holds its lock on the operation (the update that marks it followed, as AddFollowUp does),
// the close waits for it, and the close then settles the follow-up committed while it
// waited (a part of the close statement would have read the snapshot from before the wait,
// and missed it; a close that did not see the flag would not fire the trigger).
func TestACloseThatWaitedForAFollowSettlesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	op := f.toUnknown(t, "waited")
	var user int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ('wait@example.com', 'x', 'support') RETURNING id`).
		Scan(&user); err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE operations SET followed = true WHERE id = $1`, op.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO follow_ups (user_id, operation_id, created_at) VALUES ($1, $2, $3)`, user, op.ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
			Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_wait", Summary: "seen"}})
		closed <- err
	}()
	select {
	case err := <-closed:
		t.Fatalf("the close did not wait for the follow's lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	f.assertSettledWithClose(t, op, user, ops.StatusSucceeded)
}

// Operations followed before migration 00037 keep their follow-ups: the migration marks them
// followed, so their close still fires the trigger and settles them.
func TestFollowsMadeBeforeTheFlagStillSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	// The operation is opened by today's store, whose rows have columns of later migrations.
	op := f.toUnknown(t, "followed-early")
	if err := f.db.MigrateDownTo(ctx, 36); err != nil {
		t.Fatal(err)
	}
	var user int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ('early@example.com', 'x', 'support') RETURNING id`).
		Scan(&user); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO follow_ups (user_id, operation_id, created_at) VALUES ($1, $2, $3)`, user, op.ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_early", Summary: "seen"}}); err != nil {
		t.Fatal(err)
	}
	f.assertSettledWithClose(t, op, user, ops.StatusSucceeded)
}
