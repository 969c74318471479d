package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

var _ ops.Store = (*DB)(nil)

// opCols are the operation columns every query returns, in scanOp's order.
const opCols = `o.id::text, o.tenant_id, o.kind, o.provider, o.intent_key, o.provider_key, o.fingerprint,
	o.order_ref, o.customer_ref, o.chat_ref, o.payment_ref, o.amount_cents, o.currency, o.request,
	o.status, o.phase, o.version, o.attempts, o.lease_owner, o.lease_until, o.first_sent_at, o.retry_until,
	o.retention_seconds, o.provider_ref, o.provider_request_id, o.result, o.usage, o.cost_micros,
	o.created_at, o.updated_at, o.closed_at, o.closed_by, o.key_waits, o.purged_at,
	o.retry_uncertain, o.no_provider_key, o.has_lookup, o.api, o.model, o.store_opted_out, o.stripe_account`

// openReturns is opCols for Open: an operation it creates comes back without its request,
// which the caller has just sent (a long prompt would cross the wire twice); an existing
// one comes back whole.
var openReturns = strings.Replace(opCols, "o.request,", "CASE WHEN o.xmax <> 0 THEN o.request END,", 1)

func scanOp(row pgx.Row, extra ...any) (*ops.Operation, error) {
	var o ops.Operation
	var kind, status, phase string
	var retention int64
	// The jsonb columns are read as bytes: into a json.RawMessage pgx would run them through
	// json.Unmarshal, validating what Postgres already validated.
	var request, result, usage []byte
	dest := []any{&o.ID, &o.TenantID, &kind, &o.Provider, &o.IntentKey, &o.ProviderKey, &o.Fingerprint,
		&o.OrderRef, &o.CustomerRef, &o.ChatRef, &o.PaymentRef, &o.AmountCents, &o.Currency, &request,
		&status, &phase, &o.Version, &o.Attempts, &o.LeaseOwner, &o.LeaseUntil, &o.FirstSentAt, &o.RetryUntil,
		&retention, &o.ProviderRef, &o.ProviderRequestID, &result, &usage, &o.CostMicros,
		&o.CreatedAt, &o.UpdatedAt, &o.ClosedAt, &o.ClosedBy, &o.KeyWaits, &o.PurgedAt,
		&o.Policy.RetryUncertain, &o.Policy.NoProviderKey, &o.Policy.HasLookup, &o.API, &o.Model, &o.StoreOptedOut,
		&o.StripeAccount}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	o.Request, o.Result, o.Usage = request, result, usage
	o.Kind, o.Status, o.Phase = ops.Kind(kind), ops.Status(status), ops.Phase(phase)
	o.Retention = time.Duration(retention) * time.Second
	return &o, nil
}

// Join implements ops.Store. Join, Claim and BeginAttempt are sent again when Postgres
// rolls them back to break a deadlock (again).
func (db *DB) Join(ctx context.Context, opID, requestRef string, now time.Time) (ops.Opened, error) {
	row := again{db.Pool}.QueryRow(ctx, `
WITH up AS (
	UPDATE operations o SET duplicate_requests = duplicate_requests + 1 WHERE id = @id
	RETURNING `+opCols+`
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, request_id, duplicate, received_at)
	SELECT tenant_id, id::uuid, kind, @ref, @request_id, true, @now FROM up
	RETURNING id
)
SELECT up.*, cr.id FROM up, cr`, pgx.NamedArgs{"id": opID, "ref": requestRef, "now": now, "request_id": reqlog.Get(ctx, reqlog.RequestID)})
	var out ops.Opened
	o, err := scanOp(row, &out.ClientRequestID)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, ops.Errorf(ops.ENOTFOUND, "No operation %s.", opID)
	}
	if err != nil {
		return out, interpret(err, "join operation")
	}
	out.Op = o
	return out, nil
}

// Get implements ops.Store.
func (db *DB) Get(ctx context.Context, id string) (*ops.Operation, error) {
	canonical, ok := CanonicalID(id)
	if !ok {
		return nil, ops.Errorf(ops.ENOTFOUND, "No operation %q.", id)
	}
	o, err := scanOp(db.Pool.QueryRow(ctx, `SELECT `+opCols+` FROM operations o WHERE o.id = $1`, canonical))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No operation %s.", id)
	}
	if err != nil {
		return nil, interpret(err, "get operation")
	}
	return o, nil
}

// Claim implements ops.Store.
func (db *DB) Claim(ctx context.Context, p ops.ClaimParams) (*ops.Operation, error) {
	row := again{db.Pool}.QueryRow(ctx, `
UPDATE operations o SET status = 'in_progress', phase = '', lease_owner = @owner, lease_until = @until,
	version = version + 1, updated_at = @now
WHERE id = @id AND version = @version
	AND (status = 'received' OR (status = 'in_progress' AND (lease_until IS NULL OR lease_until <= @now)))
RETURNING `+opCols, pgx.NamedArgs{"id": p.ID, "version": p.Version, "owner": p.Owner, "until": p.LeaseUntil, "now": p.Now})
	o, err := scanOp(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, db.lostRace(ctx, p.ID, "claim")
	}
	if err != nil {
		return nil, interpret(err, "claim operation")
	}
	return o, nil
}

// BeginAttempt implements ops.Store. The guard repeats ops.CheckSend in SQL so that a
// caller acting on a stale copy cannot send.
func (db *DB) BeginAttempt(ctx context.Context, p ops.BeginParams) (*ops.Operation, *ops.Attempt, error) {
	row := again{db.Pool}.QueryRow(ctx, `
WITH up AS (
	UPDATE operations o SET attempts = attempts + 1, phase = 'sending', version = version + 1, updated_at = @now,
		first_sent_at = coalesce(first_sent_at, @now), retry_until = coalesce(retry_until, @retry_until::timestamptz)
	WHERE id = @id AND version = @version AND status = 'in_progress' AND lease_owner = @owner
		AND lease_until > @now AND (retry_until IS NULL OR retry_until > @now) AND attempts - key_waits < @max
	RETURNING `+opCols+`
), att AS (
	INSERT INTO attempts (operation_id, n, provider_key, owner, started_at)
	SELECT id::uuid, attempts, provider_key, @owner, @now FROM up
	RETURNING id
)
SELECT up.*, att.id FROM up, att`, pgx.NamedArgs{"id": p.ID, "version": p.Version, "owner": p.Owner, "now": p.Now,
		"max": p.MaxAttempts, "retry_until": p.RetryUntil})
	var attemptID int64
	o, err := scanOp(row, &attemptID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, db.lostRace(ctx, p.ID, "send")
	}
	if err != nil {
		return nil, nil, interpret(err, "begin attempt")
	}
	return o, &ops.Attempt{ID: attemptID, OperationID: o.ID, N: o.Attempts, ProviderKey: o.ProviderKey, Owner: p.Owner, StartedAt: p.Now}, nil
}

// SetPhase implements ops.Store. Its commit does not wait for the WAL to reach the disk
// (synchronous_commit off, for this statement's transaction alone): a phase and the lease's
// extension are progress, not decisions, and no ops rule rests on them (ops rule 5 holds an
// unfinished attempt uncertain whatever its phase). Only a crash of Postgres itself can lose
// such a write; the lease then runs out from its last durable extension, and the owner's
// finish meets a lease taken over, as it does when a renewal comes too late.
//
// A write that leaves the lease as it is changes no indexed column, so Postgres can make it
// a heap-only update, adding no entry to the indexes of operations.
func (db *DB) SetPhase(ctx context.Context, id, owner string, phase ops.Phase, leaseUntil, now time.Time) (*ops.Operation, error) {
	var until *time.Time
	if !leaseUntil.IsZero() {
		until = &leaseUntil
	}
	o, err := scanOp(again{db.Pool}.QueryRow(ctx, `
UPDATE operations o SET phase = @phase, lease_until = COALESCE(@until, lease_until), updated_at = @now
WHERE id = @id AND status = 'in_progress' AND lease_owner = @owner
	AND set_config('synchronous_commit', 'off', true) = 'off'
RETURNING `+opCols, pgx.NamedArgs{"id": id, "owner": owner, "phase": string(phase), "until": until, "now": now}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, db.lostRace(ctx, id, "set phase")
	}
	if err != nil {
		return nil, interpret(err, "set phase")
	}
	return o, nil
}

// answerRecentSQL answers a client request received within a day of the answer, which is
// every answer given while the request is being handled: planned for its parameters, the
// update reads the months of that day instead of every month of client_requests.
// answerAnySQL, run only when that finds nothing, looks in every month.
// The reason ($4) is set with the answer: a refusal's, NULL for any other answer.
const (
	answerRecentSQL = `UPDATE client_requests SET answer = $2, answered_at = $3, reason = nullif($4, '')
	WHERE id = $1 AND received_at >= $3::timestamptz - interval '1 day'`
	answerAnySQL = `UPDATE client_requests SET answer = $2, answered_at = $3, reason = nullif($4, '') WHERE id = $1`
)

// AnswerClientRequest implements ops.Store.
func (db *DB) AnswerClientRequest(ctx context.Context, id int64, a ops.Answer, at time.Time) error {
	return db.answerClientRequest(ctx, id, a, "", at)
}

// RefuseClientRequest implements ops.Store: the same one statement as AnswerClientRequest,
// with the refusal's reason.
func (db *DB) RefuseClientRequest(ctx context.Context, id int64, reason string, at time.Time) error {
	return db.answerClientRequest(ctx, id, ops.AnswerRejected, reason, at)
}

func (db *DB) answerClientRequest(ctx context.Context, id int64, a ops.Answer, reason string, at time.Time) error {
	for _, q := range []string{answerRecentSQL, answerAnySQL} {
		tag, err := execAgain(ctx, db.Pool, q, id, string(a), at, reason)
		if err != nil {
			return interpret(err, "answer client request")
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
	}
	return ops.Errorf(ops.ENOTFOUND, "No client request %d.", id)
}

// ClaimStalled implements ops.Store.
func (db *DB) ClaimStalled(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*ops.Operation, error) {
	rows, err := db.Pool.Query(ctx, `
WITH s AS (
	SELECT id FROM operations
	WHERE status = 'in_progress' AND lease_until <= @now
	ORDER BY lease_until LIMIT @limit
	FOR UPDATE SKIP LOCKED
), up AS (
	UPDATE operations o SET lease_owner = @owner, lease_until = @until, phase = '', version = version + 1, updated_at = @now
	FROM s WHERE o.id = s.id
	RETURNING `+opCols+`
), fin AS (
	UPDATE attempts a SET finished_at = @now, outcome = 'timeout', error_code = @lease_expired
	FROM up WHERE a.operation_id = up.id::uuid AND a.finished_at IS NULL
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, after, reason)
	SELECT @now, @owner, 'reap', 'operation', up.id, jsonb_build_object('status', up.status, 'version', up.version),
		'lease ran out without a result'
	FROM up
)
SELECT * FROM up`, pgx.NamedArgs{"owner": owner, "now": now, "until": leaseUntil, "limit": limit,
		"lease_expired": ops.ErrorLeaseExpired})
	if err != nil {
		return nil, interpret(err, "claim stalled operations")
	}
	return collectOps(rows)
}

// expireDueSQL is the statement of ExpireDue. The rows nobody holds are found on
// operations_retry_until_idx and the in-progress ones whose lease ran out, or that have
// none, on operations_stalled_idx (migration 00073: an in-progress row takes no entry in the
// first), by its lease, so that a tick reads the stalled rows, not every row in progress.
// Each part locks at most limit rows; the earliest due of them all are expired.
const expireDueSQL = `
WITH unheld AS (
	SELECT id, status, retry_until FROM operations
	WHERE status IN ('received', 'unknown') AND retry_until <= @now
	ORDER BY retry_until LIMIT @limit
	FOR UPDATE SKIP LOCKED
), held AS (
	SELECT id, status, retry_until FROM operations
	WHERE status = 'in_progress' AND lease_until <= @now AND retry_until <= @now
	ORDER BY retry_until LIMIT @limit
	FOR UPDATE SKIP LOCKED
), unleased AS (
	SELECT id, status, retry_until FROM operations
	WHERE status = 'in_progress' AND lease_until IS NULL AND retry_until <= @now
	ORDER BY retry_until LIMIT @limit
	FOR UPDATE SKIP LOCKED
), s AS (
	SELECT id, status FROM (SELECT * FROM unheld UNION ALL SELECT * FROM held UNION ALL SELECT * FROM unleased) d
	ORDER BY retry_until LIMIT @limit
), up AS (
	UPDATE operations o SET status = 'expired', phase = '', lease_until = NULL, version = version + 1, updated_at = @now
	FROM s WHERE o.id = s.id
	RETURNING o.id::text, o.tenant_id, o.kind, o.version, s.status AS before
), fin AS (
	UPDATE attempts a SET finished_at = @now, outcome = 'timeout', error_code = @lease_expired
	FROM up WHERE a.operation_id = up.id::uuid AND a.finished_at IS NULL
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
	SELECT @now, @actor, 'expire', 'operation', id, jsonb_build_object('status', before, 'version', version - 1),
		jsonb_build_object('status', 'expired', 'version', version), 'past the provider''s key retention'
	FROM up
), ob AS (
	INSERT INTO outbox (event_id, topic, entity_id, payload, created_at)
	SELECT e, 'operation.expired', id, jsonb_build_object('event_id', e::text, 'operation_id', id, 'tenant_id', tenant_id,
		'kind', kind, 'status', 'expired', 'previous_status', before, 'version', version, 'actor', @actor::text, 'at', @now::timestamptz), @now
	FROM (SELECT gen_random_uuid() AS e, * FROM up) up WHERE ` + outboxConsumed + `
)
SELECT count(*) FROM up`

// ExpireDue implements ops.Store.
func (db *DB) ExpireDue(ctx context.Context, actor string, now time.Time, limit int) (int, error) {
	var n int
	err := db.Pool.QueryRow(ctx, expireDueSQL, pgx.NamedArgs{"actor": actor, "now": now, "limit": limit,
		"lease_expired": ops.ErrorLeaseExpired}).Scan(&n)
	return n, interpret(err, "expire operations")
}

// Attempts implements ops.Store.
func (db *DB) Attempts(ctx context.Context, opID string) ([]ops.Attempt, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+attemptCols+` FROM attempts WHERE operation_id = $1 ORDER BY n`, opID)
	if err != nil {
		return nil, interpret(err, "list attempts")
	}
	return pgx.CollectRows(rows, scanAttempt)
}

// attemptCols are the columns scanAttempt reads, from the attempts table.
const attemptCols = `id, operation_id::text, n, provider_key, owner, started_at, finished_at, coalesce(outcome, ''), http_status,
	provider_request_id, error_code`

func scanAttempt(r pgx.CollectableRow) (ops.Attempt, error) {
	var a ops.Attempt
	var outcome string
	err := r.Scan(&a.ID, &a.OperationID, &a.N, &a.ProviderKey, &a.Owner, &a.StartedAt, &a.FinishedAt, &outcome,
		&a.HTTPStatus, &a.ProviderRequestID, &a.ErrorCode)
	a.Outcome = ops.Outcome(outcome)
	if a.FinishedAt != nil {
		a.Duration = a.FinishedAt.Sub(a.StartedAt)
	}
	return a, err
}

// lostRace explains why a guarded change matched no row: the operation is gone, or someone
// changed it first (and if they closed it, who).
func (db *DB) lostRace(ctx context.Context, id, action string) error {
	cur, err := db.Get(ctx, id)
	if err != nil {
		return err
	}
	if cur.Status.Final() {
		at := time.Time{}
		if cur.ClosedAt != nil {
			at = *cur.ClosedAt
		}
		return &ops.Error{Code: ops.ECONFLICT, Closed: &ops.Closure{Status: cur.Status, ClosedBy: cur.ClosedBy, ClosedAt: at},
			Message: fmt.Sprintf("Operation %s was already closed as %s by %s at %s.", id, cur.Status, cur.ClosedBy, at.UTC().Format(time.RFC3339))}
	}
	return ops.Errorf(ops.ECONFLICT, "Operation %s changed before %s could apply (now %s, version %d).", id, action, cur.Status, cur.Version)
}

func collectOps(rows pgx.Rows) ([]*ops.Operation, error) {
	defer rows.Close()
	var out []*ops.Operation
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, interpret(err, "read operations")
		}
		out = append(out, o)
	}
	return out, interpret(rows.Err(), "read operations")
}

// interpret turns a database error into a domain error once, at the boundary.
func jsonOrNil(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	// What a client sends was checked (ops.CheckJSONText); a provider's answer and the
	// records a lookup finds were not, and a NUL or half a surrogate pair in a model's text
	// would fail the close of a call already billed.
	return string(ops.StorableJSON(b))
}

// storableText is s as a text column takes it: PostgreSQL refuses a NUL in text, and an id
// or a summary from a provider's answer may hold one (an id escaping \u0000), which would
// fail the close of a call already billed; it becomes the replacement character, as in
// jsonOrNil.
func storableText(s string) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullTime(ok bool, t time.Time) any {
	if !ok {
		return nil
	}
	return t
}
