package pg

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

var _ desk.AuditWriter = (*DB)(nil)

// timelineLimit bounds each part of an operation's timeline; an operation has at most a
// handful of attempts, but a client may repeat a request thousands of times.
const timelineLimit = 500

// Timeline returns everything recorded about one operation. Each part is read by its
// operation index, in one round trip.
func (db *DB) Timeline(ctx context.Context, opID string) (desk.Timeline, error) {
	var tl desk.Timeline
	if _, err := uuid.Parse(opID); err != nil {
		return tl, ops.Errorf(ops.ENOTFOUND, "No operation %q.", opID)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT id, tenant_id, operation_id::text, request_ref, request_id, duplicate, coalesce(answer, ''), received_at, answered_at
FROM client_requests WHERE operation_id = $1 ORDER BY received_at, id LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Requests, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ops.ClientRequest, error) {
			var c ops.ClientRequest
			var answer string
			err := r.Scan(&c.ID, &c.TenantID, &c.OperationID, &c.RequestRef, &c.RequestID, &c.Duplicate, &answer, &c.ReceivedAt, &c.AnsweredAt)
			c.Answer = ops.Answer(answer)
			return c, err
		})
		return err
	})
	b.Queue(`SELECT `+attemptCols+` FROM attempts WHERE operation_id = $1 ORDER BY n LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Attempts, err = pgx.CollectRows(rows, scanAttempt)
		return err
	})
	b.Queue(timelineEvidenceSQL, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Evidence, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ops.Evidence, error) {
			var e ops.Evidence
			var kind string
			err := r.Scan(&e.ID, &e.OperationID, &kind, &e.ProviderRef, &e.Summary, &e.Data, &e.RecordedBy, &e.RecordedAt)
			e.Kind = ops.EvidenceKind(kind)
			return e, err
		})
		return err
	})
	b.Queue(`SELECT provider, event_id, type, object_ref, outcome, received_at
FROM provider_events WHERE operation_id = $1 ORDER BY received_at LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (desk.ProviderEventRecord, error) {
			var e desk.ProviderEventRecord
			err := r.Scan(&e.Provider, &e.EventID, &e.Type, &e.ObjectRef, &e.Outcome, &e.ReceivedAt)
			return e, err
		})
		return err
	})
	b.Queue(`SELECT `+auditCols+` FROM audit_log a WHERE a.entity = 'operation' AND a.entity_id = $1 AND `+notOpening+`
UNION ALL SELECT `+openingCols+` FROM `+openingFrom+` WHERE o.id = $1::uuid
ORDER BY 1 LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Audit, err = pgx.CollectRows(rows, scanAudit)
		return err
	})
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return desk.Timeline{}, interpret(err, "read timeline")
	}
	return tl, nil
}

// timelineEvidenceSQL reads an operation's evidence: its evidence rows, and the provider's
// direct answer to an attempt, which the attempt records (its ok outcome and the provider's
// record id) and no evidence row repeats (ops rule 9). Operations closed before the
// attempt was the record of its answer have an evidence row for it instead; the attempt
// then adds nothing. The answer's evidence has no row and so no id (0).
const timelineEvidenceSQL = `
SELECT id, operation_id::text, kind, provider_ref, summary, data, recorded_by, recorded_at FROM (
	SELECT id, operation_id, kind, provider_ref, summary, data, recorded_by, recorded_at FROM evidence WHERE operation_id = $1
	UNION ALL
	SELECT 0, a.operation_id, 'provider_response', a.provider_ref,
		'The provider answered the attempt with ' || a.provider_ref || '.', NULL, a.owner, a.finished_at
	FROM attempts a WHERE a.operation_id = $1 AND a.outcome = 'ok' AND a.provider_ref <> ''
		AND NOT EXISTS (SELECT 1 FROM evidence e
			WHERE e.operation_id = $1 AND e.kind = 'provider_response' AND e.provider_ref = a.provider_ref)
) e ORDER BY recorded_at, id LIMIT $2`

// An operation's opening is in its audit trail without a row of its own: the operation's
// creation is the fact (ops rule 6 audits each change; the opening is the first). openingCols
// read it, in auditCols' order, from an operation o that carries its opening_id: at its
// creation, by the owner whose first attempt the same statement began (openingOwner; nobody,
// for an intent received without a claim), to the status it was created in. openingID is
// negative, from 60 of the random bits of the operation's id, so it never equals an audit
// row's id and sorts before every row of the operation's own trail. Operations opened when
// the opening was a row of its own are read the same way, and notOpening leaves those rows
// out, so that each opening is listed once and a search for openings reads no audit row.
const (
	openingCols = `o.opening_id, o.created_at,
	coalesce(f.owner, ''), 'open', 'operation', o.id::text, NULL::jsonb,
	jsonb_build_object('status', CASE WHEN f.owner IS NULL THEN 'received' ELSE 'in_progress' END, 'version', 1), '', 0::bigint`
	openingID    = `-('x' || right(replace(o.id::text, '-', ''), 15))::bit(60)::bigint`
	openingFrom  = `(SELECT o.*, ` + openingID + ` AS opening_id FROM operations o) o ` + openingOwner
	openingOwner = `LEFT JOIN LATERAL (SELECT f.owner FROM attempts f
		WHERE f.operation_id = o.id AND f.n = 1 AND f.started_at = o.created_at LIMIT 1) f ON true`
	notOpening = `a.action <> 'open'`
)

const auditCols = `a.id, a.at, a.actor, a.action, a.entity, a.entity_id, a.before, a.after, a.reason, coalesce(a.evidence_id, 0)`

func scanAudit(r pgx.CollectableRow) (desk.AuditLogEntry, error) {
	var e desk.AuditLogEntry
	err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Entity, &e.EntityID, &e.Before, &e.After, &e.Reason, &e.EvidenceID)
	return e, err
}

// RecordAudit implements desk.AuditWriter.
func (db *DB) RecordAudit(ctx context.Context, e desk.AuditLogEntry) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, e.At, e.Actor, e.Action, e.Entity, e.EntityID, jsonOrNil(e.Before), jsonOrNil(e.After), e.Reason)
	return interpret(err, "record audit")
}

// AuditLog returns one page of the audit log, newest first, by keyset on (at, id). Each
// filter has its own index (migration 00003), so a page costs the same at any size.
func (db *DB) AuditLog(ctx context.Context, f desk.AuditFilter) (desk.AuditPage, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q, args := auditQuery(f)
	rows, err := db.Pool.Query(ctx, q, args)
	if err != nil {
		return desk.AuditPage{}, interpret(err, "read audit log")
	}
	list, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return desk.AuditPage{}, interpret(err, "read audit log")
	}
	page := desk.AuditPage{Entries: list}
	if len(list) > f.Limit {
		page.Entries = list[:f.Limit]
		last := page.Entries[f.Limit-1]
		page.Next = &desk.AuditCursor{At: last.At, ID: last.ID}
	}
	return page, nil
}

// rareAction is the predicate of audit_log_rare_action_idx, repeated in a query filtering
// by an action it holds so that the planner may use the index whatever the plan's parameters.
const rareAction = `a.action <> 'open' AND a.action NOT LIKE 'attempt.%'`

func auditQuery(f desk.AuditFilter) (string, pgx.NamedArgs) {
	args := pgx.NamedArgs{"limit": f.Limit + 1}
	// Openings are read from the operations (openingCols) unless the filter rules them out.
	// An actor filter asks what someone did, and an opening is the process's that took the
	// request: finding one process's openings would read every operation's first attempt,
	// so the timeline and the action's filter show them instead.
	openings := f.Actor == "" && (f.Action == "" || f.Action == "open")
	conds, opened := []string{notOpening}, []string{"true"}
	if f.Actor != "" {
		conds = append(conds, "a.actor = @actor")
		args["actor"] = f.Actor
	}
	if f.Action != "" {
		conds = append(conds, "a.action = @action")
		args["action"] = f.Action
		if f.Action != "open" && !strings.HasPrefix(f.Action, "attempt.") {
			conds = append(conds, rareAction)
		}
	}
	if f.EntityID != "" {
		conds = append(conds, "a.entity_id = @entity_id")
		args["entity_id"] = f.EntityID
		if uuid.Validate(f.EntityID) == nil {
			opened = append(opened, "o.id = @entity_id::uuid")
		} else {
			openings = false
		}
	}
	if !f.From.IsZero() {
		conds = append(conds, "a.at >= @from")
		opened = append(opened, "o.created_at >= @from")
		args["from"] = f.From
	}
	if !f.To.IsZero() {
		conds = append(conds, "a.at < @to")
		opened = append(opened, "o.created_at < @to")
		args["to"] = f.To
	}
	if f.After != nil {
		conds = append(conds, "(a.at, a.id) < (@after_at, @after_id)")
		// The first bound lets the scan of operations_created_idx start at the cursor.
		opened = append(opened, "o.created_at <= @after_at", "(o.created_at, "+openingID+") < (@after_at, @after_id)")
		args["after_at"], args["after_id"] = f.After.At, f.After.ID
	}
	q := `SELECT ` + auditCols + ` FROM audit_log a WHERE ` + strings.Join(conds, " AND ") + `
ORDER BY a.at DESC, a.id DESC LIMIT @limit`
	if !openings {
		return q, args
	}
	o := `SELECT ` + openingCols + ` FROM (SELECT o.*, ` + openingID + ` AS opening_id FROM operations o
	WHERE ` + strings.Join(opened, " AND ") + ` ORDER BY o.created_at DESC, opening_id DESC LIMIT @limit) o ` + openingOwner
	if f.Action == "open" {
		return o + `
ORDER BY 2 DESC, 1 DESC`, args
	}
	// Each part is read newest first up to the page's length, each by its own index, and
	// the page is the newest of both.
	return `SELECT * FROM ((` + q + `)
UNION ALL ` + o + `) a
ORDER BY 2 DESC, 1 DESC LIMIT @limit`, args
}

// SearchSupport finds operations by order, customer or chat reference, or by operation id,
// newest first. Each alternative repeats its index's predicate so that the planner can use
// the partial indexes whatever the value.
func (db *DB) SearchSupport(ctx context.Context, q string, limit int) ([]*ops.Operation, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, nil
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	q2, args := supportQuery(q, limit)
	rows, err := db.Pool.Query(ctx, q2, args)
	if err != nil {
		return nil, interpret(err, "search operations")
	}
	return collectOps(rows)
}

func supportQuery(q string, limit int) (string, pgx.NamedArgs) {
	alts := []string{
		"(o.order_ref = @q AND o.order_ref <> '')",
		"(o.customer_ref = @q AND o.customer_ref <> '')",
		"(o.chat_ref = @q AND o.chat_ref <> '')",
	}
	if _, err := uuid.Parse(q); err == nil {
		alts = append(alts, "o.id = @q::uuid")
	}
	return `SELECT ` + opCols + ` FROM operations o WHERE ` + strings.Join(alts, " OR ") + `
ORDER BY o.created_at DESC LIMIT @limit`, pgx.NamedArgs{"q": q, "limit": limit}
}

// Users lists every dashboard user, enabled or not, by email, with how many open
// operations each follows.
func (db *DB) Users(ctx context.Context) ([]desk.UserAccount, error) {
	rows, err := db.Pool.Query(ctx, `SELECT u.id, u.email, u.role, u.created_at, u.disabled_at,
	(SELECT count(*) FROM follow_ups f WHERE f.user_id = u.id AND f.settled_at IS NULL)
FROM users u ORDER BY lower(u.email) LIMIT 1000`)
	if err != nil {
		return nil, interpret(err, "list users")
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (desk.UserAccount, error) {
		var u desk.UserAccount
		var role string
		err := r.Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &u.DisabledAt, &u.OpenFollows)
		u.Role = desk.Role(role)
		return u, err
	})
}

// SetUserRole changes a user's role and records who did it, in one statement.
func (db *DB) SetUserRole(ctx context.Context, id int64, role desk.Role, actor string, now time.Time) error {
	if !role.Valid() {
		return ops.Errorf(ops.EINVALID, "Unknown role %q; use one of support, oncall, manager, admin.", role)
	}
	return db.changeUser(ctx, id, actor, now, "user.role", `role = @role`, pgx.NamedArgs{"role": string(role)})
}

// SetUserDisabled disables or enables a user and records who did it. A disabled user's
// sessions stop working at their next request.
func (db *DB) SetUserDisabled(ctx context.Context, id int64, disabled bool, actor string, now time.Time) error {
	action, set := "user.enable", "disabled_at = NULL"
	if disabled {
		action, set = "user.disable", "disabled_at = coalesce(u.disabled_at, @now::timestamptz)"
	}
	return db.changeUser(ctx, id, actor, now, action, set, pgx.NamedArgs{})
}

func (db *DB) changeUser(ctx context.Context, id int64, actor string, now time.Time, action, set string, args pgx.NamedArgs) error {
	args["id"], args["actor"], args["now"], args["action"] = id, actor, now, action
	var n int
	err := db.Pool.QueryRow(ctx, `
WITH old AS (SELECT id, role, disabled_at FROM users WHERE id = @id FOR UPDATE),
up AS (
	UPDATE users u SET `+set+` FROM old WHERE u.id = old.id
	RETURNING u.id, u.role, u.disabled_at
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
	SELECT @now, @actor, @action, 'user', up.id::text,
		jsonb_build_object('role', old.role, 'disabled', old.disabled_at IS NOT NULL),
		jsonb_build_object('role', up.role, 'disabled', up.disabled_at IS NOT NULL)
	FROM up JOIN old ON old.id = up.id
)
SELECT count(*) FROM up`, args).Scan(&n)
	if err != nil {
		return interpret(err, "change user")
	}
	if n == 0 {
		return ops.Errorf(ops.ENOTFOUND, "No user with id %d.", id)
	}
	return nil
}
