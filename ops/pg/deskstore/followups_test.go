package deskstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// followFixture is a database with one refund left unknown after a saved 500.
type followFixture struct {
	db     *pg.DB
	store  *deskstore.Store
	ledger *ops.Ledger
	clock  *ops.ManualClock
	op     *ops.Operation
}

func newFollowFixture(t *testing.T) *followFixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	f := &followFixture{db: db, store: deskstore.New(db), clock: ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}
	f.ledger = ops.NewLedger(db, f.clock)
	f.ledger.Register(refund.Kind())
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	seed := opstest.New(f.ledger, db)
	o, err := seed.Open(ctx, ops.Intent{TenantID: tn.ID, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "once:3800:usd",
		Fingerprint: "fp-once", OrderRef: "once", AmountCents: 3800, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour},
		"req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	f.op, err = seed.Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil || f.op.Status != ops.StatusUnknown {
		t.Fatalf("seeded %+v, %v; want an unknown operation", f.op, err)
	}
	return f
}

// person adds a dashboard user and returns its id.
func (f *followFixture) person(t *testing.T, email string) int64 {
	t.Helper()
	var id int64
	if err := f.db.Pool.QueryRow(context.Background(), `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'support') RETURNING id`,
		email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestFollowOnlyOpenOperationsOncePerPerson(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFollowFixture(t)
	op := f.op
	u := f.person(t, "once@example.com")
	created, err := f.store.AddFollowUp(ctx, u, op.ID, f.clock.Now())
	if err != nil || !created {
		t.Fatalf("follow: created %v, %v", created, err)
	}
	created, err = f.store.AddFollowUp(ctx, u, op.ID, f.clock.Now())
	if err != nil || created {
		t.Fatalf("second follow: created %v, %v; want an answer that it is already followed", created, err)
	}
	f.clock.Advance(time.Minute)
	if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		Actor: "oncall@example.com", Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_once", Summary: "seen"}}); err != nil {
		t.Fatal(err)
	}
	other := f.person(t, "late@example.com")
	_, err = f.store.AddFollowUp(ctx, other, op.ID, f.clock.Now())
	var e *ops.Error
	if !errors.As(err, &e) || e.Code != ops.ECONFLICT || e.Closed == nil {
		t.Fatalf("following a closed operation: %v, want a conflict naming who closed it", err)
	}
	if n, err := f.store.UnreadFollowUps(ctx, u); err != nil || n != 1 {
		t.Fatalf("unread %d, %v; want 1", n, err)
	}
	list, err := f.store.FollowUpsOf(ctx, u, 10)
	if err != nil || len(list) != 1 || !list[0].Settled() || list[0].Op.ID != op.ID {
		t.Fatalf("follow-ups %+v, %v", list, err)
	}
	if err := f.store.MarkFollowUpRead(ctx, other, list[0].ID, f.clock.Now()); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("another person marked it read: %v", err)
	}
	if err := f.store.MarkFollowUpRead(ctx, u, list[0].ID, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.store.UnreadFollowUps(ctx, u); n != 0 {
		t.Fatalf("unread %d after marking read", n)
	}
}
