package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

// The refund tool's Store (OpenForPayment, LastAttemptError) is satisfied here without
// ops/pg naming it: both are reads of the ledger's own operations and attempts, of any kind,
// and the use cases sit above the SQL layer, never below it.
var _ ops.EventStore = (*DB)(nil)

// LatestForIntent implements refund.Store.
func (db *DB) LatestForIntent(ctx context.Context, tenantID int64, kind ops.Kind, intentKey string) (*ops.Operation, error) {
	o, err := scanOp(db.Pool.QueryRow(ctx, `SELECT `+opCols+` FROM operations o
WHERE o.tenant_id = $1 AND o.kind = $2 AND o.intent_key = $3 ORDER BY o.intent_seq DESC LIMIT 1`, tenantID, string(kind), intentKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No operation for this intent.")
	}
	if err != nil {
		return nil, interpret(err, "find latest operation")
	}
	return o, nil
}

// LatestRefundForOrder returns the tenant's newest refund operation on an order and how
// many refund intents (amount and currency) the order has, read in one statement so that
// the count is that of the order the operation was picked from; or ENOTFOUND. refund_status
// uses it when a model knows only the order.
func (db *DB) LatestRefundForOrder(ctx context.Context, tenantID int64, orderID string) (*ops.Operation, int, error) {
	var intents int
	o, err := scanOp(db.Pool.QueryRow(ctx, `SELECT `+opCols+`, (SELECT count(DISTINCT x.intent_key) FROM operations x
	WHERE x.order_ref = o.order_ref AND x.tenant_id = o.tenant_id AND x.kind = 'refund')
FROM operations o
WHERE o.order_ref = $2 AND o.order_ref <> '' AND o.tenant_id = $1 AND o.kind = 'refund'
ORDER BY o.created_at DESC, o.id DESC LIMIT 1`, tenantID, orderID), &intents)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, ops.Errorf(ops.ENOTFOUND, "No refund for order %s.", orderID)
	}
	if err != nil {
		return nil, 0, interpret(err, "find refund by order")
	}
	return o, intents, nil
}

// OpenForPayment lists a tenant's open operations on one payment, whatever their kind: the
// refund tool checks them before it refunds what remains of the payment.
func (db *DB) OpenForPayment(ctx context.Context, tenantID int64, paymentRef string) ([]*ops.Operation, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+opCols+` FROM operations o
WHERE o.tenant_id = $1 AND o.payment_ref = $2 AND o.payment_ref <> '' AND o.status IN `+openStatuses, tenantID, paymentRef)
	if err != nil {
		return nil, interpret(err, "list open operations of a payment")
	}
	return collectOps(rows)
}

// RecordRequest implements ops.Store: the request is answered as it is recorded when p says
// how (a refusal with its reason, in the same row), and its operation, when it names one, is read from p alone: the row takes nothing
// from the operation's row and changes nothing there (no duplicate is counted).
func (db *DB) RecordRequest(ctx context.Context, p ops.RequestParams, at time.Time) (int64, error) {
	var id int64
	err := db.Pool.QueryRow(ctx, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, request_id, answer, received_at, answered_at, reason)
VALUES (@tenant, nullif(@op::text, '')::uuid, @kind, @ref, @request_id, nullif(@answer::text, ''), @at,
	CASE WHEN @answer::text <> '' THEN @at::timestamptz END, nullif(@reason::text, ''))
RETURNING id`, pgx.NamedArgs{"tenant": p.TenantID, "op": p.OperationID, "kind": string(p.Kind), "ref": p.RequestRef,
		"request_id": reqlog.Get(ctx, reqlog.RequestID), "answer": string(p.Answer), "at": at, "reason": p.Reason}).Scan(&id)
	return id, interpret(err, "record client request")
}

// LastAttemptError returns the error code of an operation's latest finished attempt, or ""
// when none finished; the refund tool and refund_status turn it into their answer.
func (db *DB) LastAttemptError(ctx context.Context, opID string) (string, error) {
	var code string
	err := db.Pool.QueryRow(ctx, `SELECT error_code FROM attempts WHERE operation_id = $1 AND finished_at IS NOT NULL
ORDER BY n DESC LIMIT 1`, opID).Scan(&code)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return code, interpret(err, "read last attempt")
}

// EventSeen implements ops.EventStore.
func (db *DB) EventSeen(ctx context.Context, provider, id string) (bool, error) {
	var seen bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM provider_events WHERE provider = $1 AND event_id = $2)`, provider, id).Scan(&seen)
	return seen, interpret(err, "check provider event")
}

// RecordEvent implements ops.EventStore.
func (db *DB) RecordEvent(ctx context.Context, e ops.ProviderEvent, operationID, outcome string) error {
	ref := ""
	if e.Record != nil {
		ref = e.Record.Ref
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO provider_events (provider, event_id, type, object_ref, operation_id, outcome, payload, received_at)
VALUES ($1, $2, $3, $4, nullif($5, '')::uuid, $6, $7, $8) ON CONFLICT (provider, event_id) DO NOTHING`,
		e.Provider, e.ID, e.Type, ref, operationID, outcome, jsonOrNil(e.Payload), e.ReceivedAt)
	return interpret(err, "record provider event")
}

// RecordCharge implements ops.EventStore. A later record of the same charge updates its
// status (a refund that failed after it was created) but never adds a second row, and never
// moves a failed or canceled charge back: the provider ends a charge there, so a record that
// says otherwise is an older one delivered late (Stripe sends events in no set order), and
// a charge counted as money moved again would be one that moved none.
func (db *DB) RecordCharge(ctx context.Context, r ops.ProviderRecord, tenantID int64, seenAt time.Time) error {
	created := r.Created
	if created.IsZero() {
		created = seenAt
	}
	_, err := db.Pool.Exec(ctx, recordChargeSQL,
		tenantID, r.Provider, r.Ref, operationIDArg(r.OperationID), r.AmountCents, r.Currency, r.Status, jsonOrNil(r.Raw), created, seenAt)
	return interpret(err, "record provider charge")
}

// recordChargeSQL records a provider charge once per provider reference. The operation is
// found by its primary key: the id a provider echoes back is validated first
// (operationIDArg), never compared as text, which would scan the table. A tenant id that
// names no tenant is recorded as none, as a charge of an unknown tenant is: provider_charges
// keeps no foreign key into tenants (migration 00068). Nor into operations (migration
// 00071): the operation is locked as the key locked it, so a charge recorded while the
// retention removes its operation waits for the removal and names no operation.
const recordChargeSQL = `
INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, raw, charged_at, seen_at)
VALUES ((SELECT t.id FROM tenants t WHERE t.id = nullif($1, 0)), $2, $3,
	(SELECT id FROM operations WHERE id = $4::uuid FOR KEY SHARE), $5, $6, $7, $8, $9, $10)
ON CONFLICT (provider, charge_ref) DO UPDATE SET status = excluded.status, seen_at = excluded.seen_at,
	raw = coalesce(excluded.raw, provider_charges.raw)
WHERE provider_charges.status NOT IN ('failed', 'canceled') OR excluded.status IN ('failed', 'canceled')`

// operationIDArg is an operation id read from a provider (metadata anyone can write) as a
// query argument: the id when it is a UUID, else NULL, which matches no operation.
func operationIDArg(id string) any {
	if canonical, ok := CanonicalID(id); ok {
		return canonical
	}
	return nil
}
