package pg_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
)

// receiver is an event consumer that applies each event id once, however often it arrives.
type receiver struct {
	mu         sync.Mutex
	deliveries map[string]int
	applied    []string
	failFirst  map[string]bool
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := req.Header.Get("Settle-Event-Id")
	r.deliveries[id]++
	if r.failFirst[id] && r.deliveries[id] == 1 {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	if r.deliveries[id] == 1 || (r.failFirst[id] && r.deliveries[id] == 2) {
		r.applied = append(r.applied, id)
	}
	w.WriteHeader(http.StatusNoContent)
}

// ops rule 10: events leave through the outbox at least once, each with its id, and a receiver applies each once.
func TestOutboxDeliversAtLeastOnceAndReceiverAppliesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	for i := range 3 {
		o, err := f.seed().Open(ctx, f.refund(fmt.Sprintf("ev%d", i), 100), "r", "w")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w", ops.AttemptResult{Outcome: ops.OutcomeOK,
			Result: &ops.Result{ProviderRef: fmt.Sprintf("re_%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	rcv := &receiver{deliveries: map[string]int{}, failFirst: map[string]bool{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	pub := &outbox.Webhook{URL: srv.URL}

	// A relay claims every event, delivers them, and dies before recording it.
	claimed, err := f.db.ClaimEvents(ctx, f.clock.Now(), f.clock.Now().Add(30*time.Second), 10)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d (%v), want 3", len(claimed), err)
	}
	rcv.failFirst[claimed[1].EventID] = true
	for _, e := range claimed {
		_ = pub.Publish(ctx, e)
	}
	// While its hold lasts, no other relay takes them.
	relay := &outbox.Relay{Store: f.db, Publisher: pub, Clock: f.clock}
	if n, err := relay.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second relay published %d (%v) during the hold", n, err)
	}
	f.clock.Advance(31 * time.Second)
	// Two relays now race; together they deliver everything still undelivered.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &outbox.Relay{Store: f.db, Publisher: pub, Clock: f.clock}
			if _, err := r.RunOnce(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE published_at IS NULL`); n != 0 {
		t.Fatalf("%d events never published", n)
	}
	if len(rcv.applied) != 3 {
		t.Fatalf("receiver applied %d events, want 3 (deliveries %v)", len(rcv.applied), rcv.deliveries)
	}
	for _, e := range claimed {
		if rcv.deliveries[e.EventID] != 2 {
			t.Fatalf("event %s delivered %d times, want 2 (once before the crash, once after)", e.EventID, rcv.deliveries[e.EventID])
		}
	}
}

func TestOutboxRetriesAFailedDelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	f.toUnknown(t, "x")
	down := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	relay := &outbox.Relay{Store: f.db, Publisher: &outbox.Webhook{URL: srv.URL}, Clock: f.clock}
	if n, err := relay.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("published %d (%v) to a receiver that is down", n, err)
	}
	down = false
	if n, _ := relay.RunOnce(ctx); n != 0 {
		t.Fatalf("retried before the backoff")
	}
	f.clock.Advance(time.Minute)
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("published %d (%v) after the backoff, want 1", n, err)
	}
}

// ops rule 7: no transaction holding row locks is open while the provider call runs.
func TestNoTransactionIsOpenDuringTheProviderCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("long", 100), "r", "w")
	if err != nil {
		t.Fatal(err)
	}
	sender := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		// While the provider is "thinking", the row is free and no session sits in a transaction.
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			return ops.AttemptResult{Outcome: ops.OutcomeNotSent}
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT 1 FROM operations WHERE id = $1 FOR UPDATE NOWAIT`, op.ID); err != nil {
			t.Errorf("row locked during the provider call: %v", err)
		}
		var idle int
		_ = f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`).Scan(&idle)
		if idle != 1 { // only our own probe transaction above
			t.Errorf("%d sessions idle in transaction during the call, want only the probe", idle)
		}
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_long"}}
	})
	if _, err := f.ledger.Run(ctx, o.Op, sender, ops.RunSpec{Owner: "w", First: o.Attempt}); err != nil {
		t.Fatal(err)
	}
}

// Delivered events leave the outbox after Keep, at most once an hour; an undelivered one
// stays however old it is.
func TestOutboxPrunesOldDeliveriesOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	up := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	relay := &outbox.Relay{Store: f.db, Publisher: &outbox.Webhook{URL: srv.URL}, Clock: f.clock, Keep: 24 * time.Hour}
	f.toUnknown(t, "delivered-1")
	f.toUnknown(t, "delivered-2")
	if n, err := relay.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("published %d (%v), want 2", n, err)
	}
	up = false
	f.toUnknown(t, "never-delivered")
	if n, _ := relay.RunOnce(ctx); n != 0 {
		t.Fatal("a receiver that is down took an event")
	}
	rows := func() (delivered, waiting int) {
		delivered = f.count(t, `SELECT count(*) FROM outbox WHERE published_at IS NOT NULL`)
		waiting = f.count(t, `SELECT count(*) FROM outbox WHERE published_at IS NULL`)
		return
	}
	// Half an hour later nothing is old enough; a day later the delivered ones go.
	f.clock.Advance(30 * time.Minute)
	relay.RunOnce(ctx)
	if d, w := rows(); d != 2 || w != 1 {
		t.Fatalf("after 30 min: %d delivered, %d waiting", d, w)
	}
	f.clock.Advance(24 * time.Hour)
	relay.RunOnce(ctx)
	if d, w := rows(); d != 0 || w != 1 {
		t.Fatalf("after a day: %d delivered, %d waiting; want 0 and the undelivered one", d, w)
	}
	// The receiver comes back: the old event is delivered, and kept for a day from its
	// delivery, not from its creation.
	up = true
	f.clock.Advance(time.Hour)
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("published %d (%v), want the waiting event", n, err)
	}
	f.clock.Advance(2 * time.Hour)
	relay.RunOnce(ctx)
	if d, w := rows(); d != 1 || w != 0 {
		t.Fatalf("2 h after its delivery: %d delivered, %d waiting", d, w)
	}
}

// Pruning is hourly: a pass within the hour deletes nothing, even what is old enough.
func TestOutboxPrunesAtMostHourly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	relay := &outbox.Relay{Store: f.db, Publisher: &outbox.Webhook{URL: srv.URL}, Clock: f.clock, Keep: time.Minute}
	f.toUnknown(t, "a")
	relay.RunOnce(ctx) // delivers it, and prunes (nothing yet): the hour starts
	f.clock.Advance(10 * time.Minute)
	relay.RunOnce(ctx)
	if n := f.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d events 10 min after the last prune, want the delivered one kept", n)
	}
	f.clock.Advance(time.Hour)
	relay.RunOnce(ctx)
	if n := f.count(t, `SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("%d events an hour later, want 0", n)
	}
}
