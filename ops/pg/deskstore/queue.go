package deskstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// countCap bounds the counts that need a scan: past it the page says "1000+" rather than
// count millions of rows.
const countCap = desk.QueueCountCap

// QueueCounts implements desk.Queues. Without an age or search filter the unknown and
// expired counts come from queue_counts, which a trigger keeps, so they cost the same at
// 10 M operations as at 10.
func (s *Store) QueueCounts(ctx context.Context, f desk.QueueFilter) (map[ops.Status]int64, error) {
	out := map[ops.Status]int64{}
	var rows pgx.Rows
	var err error
	// The repeated status list lets the planner use the partial queue index in the scanned
	// counts; without it each count reads the whole table.
	if f.OlderThan <= 0 && f.Search == "" && !f.Awaiting {
		// Unknown and expired from the maintained counts; received and in-progress rows are
		// few and counted from their partial indexes, capped like the scanned counts.
		// Only the filters given go into the live counts, so they run as index-only scans.
		where, args := queueWhere(f, f.Now)
		args["cap"] = countCap + 1
		rows, err = s.db.Pool.Query(ctx, `
SELECT status, sum(n)::bigint FROM queue_counts
WHERE (@tenant::bigint = 0 OR tenant_id = @tenant::bigint) AND (@kind::text = '' OR kind = @kind::text)
	AND (@provider::text = '' OR provider = @provider::text)
GROUP BY status
UNION ALL
SELECT 'in_progress', count(*) FROM (SELECT 1 FROM operations o WHERE o.status = 'in_progress' AND `+where+` LIMIT @cap) x
UNION ALL
SELECT 'received', count(*) FROM (SELECT 1 FROM operations o WHERE o.status = 'received' AND `+where+` LIMIT @cap) x`,
			withArgs(withArgs(withArgs(args, "tenant", f.TenantID), "kind", string(f.Kind)), "provider", f.Provider))
	} else {
		where, args := queueWhere(f, f.Now)
		// The in-progress rows apart, on operations_stalled_idx: operations_queue_idx keeps
		// the rows nobody holds only (migration 00073).
		rows, err = s.db.Pool.Query(ctx, `
SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM operations o
	WHERE o.status = s.status AND o.status IN `+pg.UnheldStatuses+` AND `+where+` LIMIT @cap) x)
FROM unnest(`+pg.UnheldStatusArray+`) AS s(status)
UNION ALL
SELECT 'in_progress', count(*) FROM (SELECT 1 FROM operations o WHERE o.status = 'in_progress' AND `+where+` LIMIT @cap) x`,
			withArgs(args, "cap", countCap+1))
	}
	if err != nil {
		return nil, pg.Interpret(err, "count queues")
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, pg.Interpret(err, "count queues")
		}
		out[ops.Status(s)] = n
	}
	return out, pg.Interpret(rows.Err(), "count queues")
}

// ListQueue implements desk.Queues: one page, oldest first, by keyset on (created_at, id).
func (s *Store) ListQueue(ctx context.Context, f desk.QueueFilter, now time.Time) (desk.QueuePage, error) {
	if f.Status == "" {
		f.Status = ops.StatusUnknown
	}
	if f.Status.Final() || !f.Status.Valid() {
		return desk.QueuePage{}, ops.Errorf(ops.EINVALID, "There is no %q queue.", f.Status)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	where, args := queueWhere(f, now)
	args["status"], args["limit"] = string(f.Status), f.Limit+1
	if f.After != nil {
		where += ` AND (o.created_at, o.id) > (@after_at, @after_id::uuid)`
		args["after_at"], args["after_id"] = f.After.CreatedAt, f.After.ID
	}
	rows, err := s.db.Pool.Query(ctx, listQueueSQL(f.Status, where), args)
	if err != nil {
		return desk.QueuePage{}, pg.Interpret(err, "list queue")
	}
	list, err := pg.CollectOps(rows)
	if err != nil {
		return desk.QueuePage{}, err
	}
	page := desk.QueuePage{Ops: list}
	if len(list) > f.Limit {
		page.Ops = list[:f.Limit]
		last := page.Ops[f.Limit-1]
		page.Next = &desk.QueueCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// listQueueSQL is the statement of one page of the queue of status, filtered by where. The
// rows nobody holds are read oldest first on operations_queue_idx. The in-progress rows
// are not in that index (migration 00073): they are as many as the calls in flight, each
// held by a lease, and are read on operations_stalled_idx and sorted; the fence keeps the
// planner from walking operations_created_idx from the oldest operation of all in search of
// the few in progress, which are the newest.
func listQueueSQL(status ops.Status, where string) string {
	if status != ops.StatusInProgress {
		return `SELECT ` + pg.OpCols + ` FROM operations o
WHERE o.status = @status AND ` + where + ` ORDER BY o.created_at, o.id LIMIT @limit`
	}
	return `WITH held AS MATERIALIZED (SELECT o.id, o.created_at FROM operations o WHERE o.status = @status AND ` + where + `)
SELECT ` + pg.OpCols + ` FROM operations o JOIN (SELECT id FROM held ORDER BY created_at, id LIMIT @limit) p ON p.id = o.id
ORDER BY o.created_at, o.id`
}

// queueWhere builds the filter part shared by the list and the scanned counts.
func queueWhere(f desk.QueueFilter, now time.Time) (string, pgx.NamedArgs) {
	conds := []string{"true"}
	args := pgx.NamedArgs{}
	if f.TenantID > 0 {
		conds = append(conds, "o.tenant_id = @tenant")
		args["tenant"] = f.TenantID
	}
	if f.Kind != "" {
		conds = append(conds, "o.kind = @kind")
		args["kind"] = string(f.Kind)
	}
	if f.Provider != "" {
		conds = append(conds, "o.provider = @provider")
		args["provider"] = f.Provider
	}
	if now.IsZero() {
		now = time.Now()
	}
	if f.OlderThan > 0 {
		conds = append(conds, "o.created_at <= @cutoff")
		args["cutoff"] = now.Add(-f.OlderThan)
	}
	if f.Awaiting {
		conds = append(conds, "EXISTS (SELECT 1 FROM close_proposals cp WHERE cp.operation_id = o.id AND cp.state = 'open' AND cp.expires_at > @awaiting_at)")
		args["awaiting_at"] = now
	}
	if q := strings.TrimSpace(f.Search); q != "" {
		alts := []string{"o.order_ref = @q", "o.customer_ref = @q", "o.chat_ref = @q", pg.ProviderKeyMatch(q, "q", args), "o.payment_ref = @q"}
		if id, ok := pg.CanonicalID(q); ok {
			alts = append(alts, "o.id = @qid::uuid")
			args["qid"] = id
		}
		conds = append(conds, fmt.Sprintf("(%s)", strings.Join(alts, " OR ")))
		args["q"] = q
	}
	return strings.Join(conds, " AND "), args
}

func withArgs(a pgx.NamedArgs, k string, v any) pgx.NamedArgs {
	a[k] = v
	return a
}

// SearchSupport finds operations by order, customer or chat reference, or by operation id,
// newest first. Each alternative repeats its index's predicate so that the planner can use
// the partial indexes whatever the value.
func (s *Store) SearchSupport(ctx context.Context, q string, limit int) ([]*ops.Operation, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, nil
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	q2, args := supportQuery(q, limit)
	rows, err := s.db.Pool.Query(ctx, q2, args)
	if err != nil {
		return nil, pg.Interpret(err, "search operations")
	}
	return pg.CollectOps(rows)
}

func supportQuery(q string, limit int) (string, pgx.NamedArgs) {
	alts := []string{
		"(o.order_ref = @q AND o.order_ref <> '')",
		"(o.customer_ref = @q AND o.customer_ref <> '')",
		"(o.chat_ref = @q AND o.chat_ref <> '')",
	}
	args := pgx.NamedArgs{"q": q, "limit": limit}
	if id, ok := pg.CanonicalID(q); ok {
		alts = append(alts, "o.id = @qid::uuid")
		args["qid"] = id
	}
	return `SELECT ` + pg.OpCols + ` FROM operations o WHERE ` + strings.Join(alts, " OR ") + `
ORDER BY o.created_at DESC LIMIT @limit`, args
}
