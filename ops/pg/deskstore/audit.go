package deskstore

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

const auditCols = `a.id, a.at, a.actor, a.action, a.entity, a.entity_id, a.before, a.after, a.reason, coalesce(a.evidence_id, 0)`

func scanAudit(r pgx.CollectableRow) (desk.AuditLogEntry, error) {
	var e desk.AuditLogEntry
	err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Entity, &e.EntityID, &e.Before, &e.After, &e.Reason, &e.EvidenceID)
	return e, err
}

// RecordAudit implements desk.AuditWriter.
func (s *Store) RecordAudit(ctx context.Context, e desk.AuditLogEntry) error {
	_, err := s.db.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, e.At, e.Actor, e.Action, e.Entity, e.EntityID, pg.JSONOrNil(e.Before), pg.JSONOrNil(e.After), e.Reason)
	return pg.Interpret(err, "record audit")
}

// AuditLog returns one page of the audit log, newest first, by keyset on (at, id). Each
// filter has its own index (migration 00003), so a page costs the same at any size.
func (s *Store) AuditLog(ctx context.Context, f desk.AuditFilter) (desk.AuditPage, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q, args := auditQuery(f)
	rows, err := s.db.Pool.Query(ctx, q, args)
	if err != nil {
		return desk.AuditPage{}, pg.Interpret(err, "read audit log")
	}
	list, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return desk.AuditPage{}, pg.Interpret(err, "read audit log")
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
	o := `SELECT ` + openingCols + ` FROM (SELECT o.*, ` + openingID + ` AS opening_id FROM operations o
	WHERE ` + strings.Join(opened, " AND ") + ` ORDER BY o.created_at DESC, opening_id DESC LIMIT @limit) o ` + openingOwner
	if openings && f.Action == "open" {
		return o + `
ORDER BY 2 DESC, 1 DESC`, args
	}
	parts := []string{"(" + q + ")"}
	if openings {
		parts = append(parts, o)
	}
	if d, ok := finishesQuery(f, args); ok {
		parts = append(parts, "("+d+")")
	}
	if len(parts) == 1 {
		return q, args
	}
	// Each part is read newest first up to the page's length, each by its own index, and
	// the page is the newest of them.
	return `SELECT * FROM (` + strings.Join(parts, "\nUNION ALL ") + `) a
ORDER BY 2 DESC, 1 DESC LIMIT @limit`, args
}
