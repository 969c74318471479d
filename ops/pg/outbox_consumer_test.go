package pg_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// ops rules 6 and 10: a change writes its outbox event only for a tenant and kind that a
// consumer is registered for: an event nobody receives is not written.
func TestOutboxEventOnlyForARegisteredConsumer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-nobody")
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1`, op.ID); n != 0 {
		t.Errorf("%d outbox events nobody consumes, want 0", n)
	}
	if err := f.db.RegisterOutboxConsumer(ctx, "llm-only", f.tenant, ops.KindLLMCall, t0); err != nil {
		t.Fatal(err)
	}
	op = f.lifecycle(t, "ord-other-kind")
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1`, op.ID); n != 0 {
		t.Errorf("%d outbox events for a kind nobody consumes, want 0", n)
	}
	if err := f.db.RegisterOutboxConsumer(ctx, "refunds", f.tenant, ops.KindRefund, t0); err != nil {
		t.Fatal(err)
	}
	op = f.lifecycle(t, "ord-consumed")
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1 AND topic = 'operation.succeeded'`, op.ID); n != 1 {
		t.Errorf("%d outbox events for a consumed tenant and kind, want 1", n)
	}
	// A consumer of every tenant and kind (a server's SETTLE_OUTBOX_URL) takes any other tenant's.
	var other int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('globex') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	f.tenant = other
	op = f.lifecycle(t, "ord-globex")
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1`, op.ID); n != 0 {
		t.Errorf("%d outbox events for another tenant, want 0", n)
	}
	if err := f.db.RegisterOutboxConsumer(ctx, "webhook", 0, "", t0); err != nil {
		t.Fatal(err)
	}
	op = f.lifecycle(t, "ord-globex-2")
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1`, op.ID); n != 1 {
		t.Errorf("%d outbox events with a consumer of everything, want 1", n)
	}
}

// consumeOutbox registers a consumer of every tenant's and kind's outbox events, as a server
// with SETTLE_OUTBOX_URL does, for a test of the events themselves.
func (f *fixture) consumeOutbox(t *testing.T) {
	t.Helper()
	if err := f.db.RegisterOutboxConsumer(context.Background(), "test", 0, "", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
}
