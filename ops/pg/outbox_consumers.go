package pg

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
)

// outboxConsumed is the condition, on an operation up, under which a change writes its
// outbox event (ops rules 6 and 10): some consumer is registered for the operation's tenant
// and kind. An event nobody receives would wait undelivered, and so undeleted, for good.
const outboxConsumed = `EXISTS (SELECT 1 FROM outbox_consumers c
		WHERE (c.tenant_id IS NULL OR c.tenant_id = up.tenant_id) AND (c.kind IS NULL OR c.kind = up.kind))`

// RegisterOutboxConsumer records that name consumes the outbox events of tenantID's
// operations of kind (0 and "": every tenant and every kind), so that changes from now on
// write them. Registering a name again replaces what it consumes. Changes made before a
// consumer was registered have no event.
func (db *DB) RegisterOutboxConsumer(ctx context.Context, name string, tenantID int64, kind ops.Kind, at time.Time) error {
	if name == "" {
		return ops.Errorf(ops.EINVALID, "An outbox consumer needs a name.")
	}
	var tenant, k any
	if tenantID != 0 {
		tenant = tenantID
	}
	if kind != "" {
		k = string(kind)
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO outbox_consumers (name, tenant_id, kind, registered_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET tenant_id = excluded.tenant_id, kind = excluded.kind, registered_at = excluded.registered_at`,
		name, tenant, k, at)
	return interpret(err, "register outbox consumer")
}

// RemoveOutboxConsumer stops writing outbox events for name; events already written stay
// until they are delivered.
func (db *DB) RemoveOutboxConsumer(ctx context.Context, name string) error {
	_, err := db.Pool.Exec(ctx, `DELETE FROM outbox_consumers WHERE name = $1`, name)
	return interpret(err, "remove outbox consumer")
}
