package deskstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// timelineLimit bounds each part of an operation's timeline; an operation has at most a
// handful of attempts, but a client may repeat a request thousands of times.
const timelineLimit = 500

// Timeline returns everything recorded about one operation. Each part is read by its
// operation index, in one round trip.
func (s *Store) Timeline(ctx context.Context, opID string) (desk.Timeline, error) {
	var tl desk.Timeline
	id, ok := pg.CanonicalID(opID)
	if !ok {
		return tl, ops.Errorf(ops.ENOTFOUND, "No operation %q.", opID)
	}
	opID = id
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
	b.Queue(`SELECT `+pg.AttemptCols+` FROM attempts WHERE operation_id = $1 ORDER BY n LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Attempts, err = pgx.CollectRows(rows, pg.ScanAttempt)
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
UNION ALL SELECT `+finishCols+` FROM attempts a WHERE a.operation_id = $1::uuid AND `+finishAudited+`
ORDER BY 1 LIMIT $2`, opID, timelineLimit).Query(func(rows pgx.Rows) error {
		var err error
		tl.Audit, err = pgx.CollectRows(rows, scanAudit)
		return err
	})
	if err := s.db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return desk.Timeline{}, pg.Interpret(err, "read timeline")
	}
	return tl, nil
}

// timelineEvidenceSQL reads an operation's evidence: its evidence rows, and the provider's
// direct answer to an attempt, which the attempt records (its ok outcome, with the provider's
// record id on it or on its operation: pg.AttemptRefSQL) and no evidence row repeats
// (ops rule 9). Operations closed before the attempt was the record of its answer have an
// evidence row for it instead; the attempt then adds nothing. The answer's evidence has no
// row and so no id (0).
const timelineEvidenceSQL = `
SELECT id, operation_id::text, kind, provider_ref, summary, data, recorded_by, recorded_at FROM (
	SELECT id, operation_id, kind, provider_ref, summary, data, recorded_by, recorded_at FROM evidence WHERE operation_id = $1
	UNION ALL
	SELECT 0, a.operation_id, 'provider_response', r.ref,
		'The provider answered the attempt with ' || r.ref || '.', NULL, a.owner, a.finished_at
	FROM attempts a JOIN operations o ON o.id = a.operation_id, LATERAL (SELECT ` + pg.AttemptRefSQL + ` AS ref) r
	WHERE a.operation_id = $1 AND a.outcome = 'ok' AND r.ref <> ''
		AND NOT EXISTS (SELECT 1 FROM evidence e
			WHERE e.operation_id = $1 AND e.kind = 'provider_response' AND e.provider_ref = r.ref)
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
