package deskstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// An attempt's finish by the process that sent it is in its operation's audit trail without
// a row of its own, as the opening is (ops rule 6 audits each change): the attempt holds the
// fact, and the operation's status, version and phase after it with the entry's id
// (pg.Transition's finishAudited). finishCols read the entry in auditCols' order from an
// attempt a: at its finish, by whoever finished it, the operation in progress at the version
// before, its reason the outcome's when the operation left in_progress. The id was drawn
// from the audit log's own sequence, so it never equals an audit row's id and sorts among
// the operation's rows where a row of its own would. Attempts finished before carry no such
// id; their audit rows are read as they were, so each finish is listed once.
const (
	finishCols = `a.audit_id, a.finished_at, coalesce(a.finished_by, a.owner), 'attempt.' || a.outcome, 'operation',
	a.operation_id::text, jsonb_build_object('status', 'in_progress', 'version', a.op_version - 1),
	jsonb_build_object('status', a.op_status, 'version', a.op_version, 'phase', a.op_phase),
	CASE WHEN a.op_status IN ('succeeded', 'failed', 'unknown', 'expired') THEN 'attempt ' || a.outcome ELSE '' END, 0::bigint`
	finishAudited = `a.audit_id IS NOT NULL`
)

// finishWindow is pg.FinishAuditWindow in SQL: a finish read as an entry came at most this
// long after its attempt's start, with a second more for the times' rounding to the
// microsecond when they were stored.
var finishWindow = fmt.Sprintf("interval '%d seconds'", int((pg.FinishAuditWindow+time.Second)/time.Second))

// finishesQuery reads the attempts' finishes that f lists, newest first by (at, id), up to
// f's page; ok is false when f rules them all out. An actor filter rules them out, as it
// does openings: it asks what someone did, and a finish is the process's that sent the
// attempt; finding one process's finishes would read every attempt, where the timeline and
// the action's filter show them.
//
// There is no index of attempts by their finish (one would end the finish's heap-only
// update), so the entries are found through the start-time index: each finished within
// finishWindow of its start. The newest starts below the page's bounds, as many as a page
// holds, finished at m or later, so the page's oldest entry finished at m or later and
// every entry of the page started at m − finishWindow or later, and none started after the
// newest of them; the page sorts the finishes of that window of starts.
func finishesQuery(f desk.AuditFilter, args pgx.NamedArgs) (string, bool) {
	if f.Actor != "" || (f.Action != "" && !strings.HasPrefix(f.Action, "attempt.")) {
		return "", false
	}
	conds := []string{finishAudited}
	if f.Action != "" {
		conds = append(conds, "a.outcome = @finish_outcome")
		args["finish_outcome"] = strings.TrimPrefix(f.Action, "attempt.")
	}
	if !f.From.IsZero() {
		conds = append(conds, "a.finished_at >= @from", "a.started_at >= @from::timestamptz - "+finishWindow)
	}
	if !f.To.IsZero() {
		conds = append(conds, "a.finished_at < @to", "a.started_at < @to")
	}
	if f.After != nil {
		conds = append(conds, "(a.finished_at, a.audit_id) < (@after_at, @after_id)", "a.started_at <= @after_at")
	}
	if f.EntityID != "" {
		if uuid.Validate(f.EntityID) != nil {
			return "", false
		}
		// One operation's attempts, by their operation's index: a handful.
		return `SELECT ` + finishCols + ` FROM attempts a WHERE a.operation_id = @entity_id::uuid AND ` +
			strings.Join(conds, " AND ") + ` ORDER BY a.finished_at DESC, a.audit_id DESC LIMIT @limit`, true
	}
	where := strings.Join(conds, " AND ")
	newest := `FROM (SELECT a.started_at, a.finished_at FROM attempts a WHERE ` + where + ` ORDER BY a.started_at DESC LIMIT @limit) s`
	return `SELECT ` + finishCols + ` FROM attempts a WHERE ` + where + `
	AND a.started_at BETWEEN (SELECT CASE WHEN count(*) < @limit THEN '-infinity' ELSE min(s.finished_at) END ` + newest + `) - ` + finishWindow + `
		AND (SELECT max(s.started_at) ` + newest + `)
ORDER BY a.finished_at DESC, a.audit_id DESC LIMIT @limit`, true
}
