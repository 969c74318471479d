package deskstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/desk"
)

// DashboardPlans returns the plan Postgres picks for each list the dashboard reads, by
// name, so tests can check every one is served by an index.
func (s *Store) DashboardPlans(ctx context.Context, opID string, f desk.AuditFilter, search string, q desk.QueueFilter) (map[string]string, error) {
	plans := map[string]string{}
	explain := func(name, sql string, args ...any) error {
		rows, err := s.db.Pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return fmt.Errorf("explain %s: %w", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("explain %s: %w", name, err)
		}
		plans[name] = strings.Join(lines, "\n")
		return nil
	}
	if f.Limit == 0 {
		f.Limit = 50
	}
	sql, args := auditQuery(f)
	if err := explain("audit", sql, args); err != nil {
		return nil, err
	}
	sql, args = supportQuery(search, 20)
	if err := explain("support", sql, args); err != nil {
		return nil, err
	}
	where, qargs := queueWhere(q, q.Now)
	qargs["status"], qargs["limit"] = string(q.Status), 51
	if err := explain("queue", listQueueSQL(q.Status, where), qargs); err != nil {
		return nil, err
	}
	for name, sql := range map[string]string{
		"timeline.requests": `SELECT id FROM client_requests WHERE operation_id = $1 ORDER BY received_at, id LIMIT 500`,
		"timeline.attempts": `SELECT id FROM attempts WHERE operation_id = $1 ORDER BY n LIMIT 500`,
		"timeline.evidence": `SELECT id FROM evidence WHERE operation_id = $1 ORDER BY recorded_at, id LIMIT 500`,
		"timeline.events":   `SELECT event_id FROM provider_events WHERE operation_id = $1 ORDER BY received_at LIMIT 500`,
		"timeline.audit":    `SELECT a.id FROM audit_log a WHERE a.entity = 'operation' AND a.entity_id = $1 ORDER BY a.id LIMIT 500`,
	} {
		if err := explain(name, sql, opID); err != nil {
			return nil, err
		}
	}
	return plans, nil
}
