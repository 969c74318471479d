package alertstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops/pg"
)

// tallyQueries count the rows behind each counter of /metrics: the tenant, kind and
// provider, then the metric's own labels, then the count.
var tallyQueries = []struct {
	metric string
	labels []string
	sql    string
}{
	{alerts.MetricClientRequests, []string{"answer", "duplicate", "api", "reason"}, `
SELECT coalesce(t.name, ''), cr.kind, coalesce(o.provider, ''), cr.answer, cr.duplicate::text,
` + apiLabel + `, coalesce(cr.reason, ''), count(*)::float8
FROM (` + answeredRequestsSQL + `) cr LEFT JOIN operations o ON o.id = cr.operation_id LEFT JOIN tenants t ON t.id = cr.tenant_id
GROUP BY 1, 2, 3, 4, 5, 6, 7`},
	{alerts.MetricAttempts, []string{"outcome", "api"}, `
SELECT coalesce(t.name, ''), o.kind, o.provider, a.outcome, ` + apiLabel + `, count(*)::float8
FROM attempts a JOIN operations o ON o.id = a.operation_id LEFT JOIN tenants t ON t.id = o.tenant_id
WHERE a.started_at >= @since AND a.started_at < @to AND a.finished_at >= @from AND a.finished_at < @to
GROUP BY 1, 2, 3, 4, 5`},
	{alerts.MetricOperationsCreated, []string{"api"}, `
SELECT coalesce(t.name, ''), o.kind, o.provider, ` + apiLabel + `, count(*)::float8
FROM operations o LEFT JOIN tenants t ON t.id = o.tenant_id
WHERE o.created_at >= @from AND o.created_at < @to
GROUP BY 1, 2, 3, 4`},
	{alerts.MetricOperationsClosed, []string{"status", "api"}, `
SELECT coalesce(t.name, ''), o.kind, o.provider, o.status, ` + apiLabel + `, count(*)::float8
FROM operations o LEFT JOIN tenants t ON t.id = o.tenant_id
WHERE o.closed_at >= @from AND o.closed_at < @to
GROUP BY 1, 2, 3, 4, 5`},
	{alerts.MetricProviderCharges, []string{"orphan", "double"}, `
SELECT coalesce(t.name, ''), coalesce(o.kind, ''), pc.provider, (pc.operation_id IS NULL)::text,
(pc.operation_id IS NOT NULL AND EXISTS (
	SELECT 1 FROM provider_charges p2
	WHERE p2.operation_id = pc.operation_id AND p2.status IN ` + pg.ChargedStatuses + `
		AND (p2.charged_at, p2.id) < (pc.charged_at, pc.id)))::text,
count(*)::float8
FROM provider_charges pc LEFT JOIN operations o ON o.id = pc.operation_id
LEFT JOIN tenants t ON t.id = coalesce(o.tenant_id, pc.tenant_id)
WHERE pc.seen_at >= @from AND pc.seen_at < @to AND pc.status IN ` + pg.ChargedStatuses + `
GROUP BY 1, 2, 3, 4, 5
UNION ALL
SELECT coalesce(t.name, ''), o.kind, o.provider, 'false', 'true', sum(` + pg.ExtraGenerations + `)::float8
FROM recon_exceptions e JOIN operations o ON o.id = e.operation_id LEFT JOIN tenants t ON t.id = o.tenant_id
WHERE ` + pg.DoubleGenerations + ` AND e.first_seen_at >= @from AND e.first_seen_at < @to
GROUP BY 1, 2, 3`},
	{alerts.MetricPossibleDuplicates, []string{"api"}, `
SELECT coalesce(t.name, ''), o.kind, o.provider, ` + apiLabel + `, count(*)::float8
FROM attempts a JOIN operations o ON o.id = a.operation_id LEFT JOIN tenants t ON t.id = o.tenant_id
WHERE a.possible_duplicate AND a.started_at < @to AND a.finished_at >= @from AND a.finished_at < @to
GROUP BY 1, 2, 3, 4`},
}

// answeredRequestsSQL is the client requests counted in [@from, @to): those answered in it
// within @reach of their arrival, read from @since (received before it, they were answered
// before the previous count), and those whose @reach ran out in it unanswered, each once,
// with no reason. Both halves read client_requests_received_idx over a range of their own.
const answeredRequestsSQL = `
SELECT cr.tenant_id, cr.operation_id, cr.kind, cr.duplicate, cr.answer, cr.reason FROM client_requests cr
WHERE cr.received_at >= @since AND cr.received_at < @to AND cr.answered_at >= @from AND cr.answered_at < @to
	AND cr.answered_at < cr.received_at + make_interval(secs => @reach)
UNION ALL
SELECT cr.tenant_id, cr.operation_id, cr.kind, cr.duplicate, 'unanswered', NULL FROM client_requests cr
WHERE cr.received_at >= @from_reach AND cr.received_at < @to_reach
	AND (cr.answered_at IS NULL OR cr.answered_at >= cr.received_at + make_interval(secs => @reach))`

// Tally is TallySince for one window alone: the attempts counted are those that started
// and finished in it.
func (s *Store) Tally(ctx context.Context, from, to time.Time) ([]alerts.Tally, error) {
	out, _, err := s.TallySince(ctx, from, from, to)
	return out, err
}

// TallySince implements alerts.MetricsSource: rows recorded in [from, to), each count on the
// index of its time column. Attempts are counted by the time they finished, on the index of
// their start, read from since: an attempt counted when it started, still running, would
// never be counted as the timeout it became (ops rule 8). Client requests are counted so by
// the time they were answered, on the index of their arrival: a request that waited for
// another one's send would stay unanswered forever (answeredRequestsSQL).
func (s *Store) TallySince(ctx context.Context, since, from, to time.Time) ([]alerts.Tally, time.Time, error) {
	args := pgx.NamedArgs{"since": since, "from": from, "to": to, "reach": alerts.AnswerReach.Seconds(),
		"from_reach": from.Add(-alerts.AnswerReach), "to_reach": to.Add(-alerts.AnswerReach)}
	var out []alerts.Tally
	for _, q := range tallyQueries {
		rows, err := s.db.Pool.Query(ctx, q.sql, args)
		if err != nil {
			return nil, since, pg.Interpret(err, "count "+q.metric)
		}
		vals := make([]string, 3+len(q.labels))
		var n float64
		dest := make([]any, 0, len(vals)+1)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		dest = append(dest, &n)
		_, err = pgx.ForEachRow(rows, dest, func() error {
			l := map[string]string{"tenant": vals[0], "kind": vals[1], "provider": vals[2]}
			for i, name := range q.labels {
				l[name] = vals[3+i]
			}
			out = append(out, alerts.Tally{Metric: q.metric, Labels: l, N: n})
			return nil
		})
		if err != nil {
			return nil, since, pg.Interpret(err, "count "+q.metric)
		}
	}
	next, err := s.oldestRunning(ctx, args)
	if err != nil {
		return nil, since, err
	}
	return out, next, nil
}

// oldestRunning is where the next tally's attempts and requests begin: the start of the
// oldest attempt, or the arrival of the oldest client request, in [since, to) that had not
// finished or been answered by to; or to.
func (s *Store) oldestRunning(ctx context.Context, args pgx.NamedArgs) (time.Time, error) {
	var next time.Time
	err := s.db.Pool.QueryRow(ctx, `SELECT least(@to::timestamptz,
	(SELECT min(a.started_at) FROM attempts a
	WHERE a.started_at >= @since AND a.started_at < @to AND (a.finished_at IS NULL OR a.finished_at >= @to)),
	(SELECT min(cr.received_at) FROM client_requests cr
	WHERE cr.received_at >= @since AND cr.received_at < @to AND (cr.answered_at IS NULL OR cr.answered_at >= @to)))`, args).Scan(&next)
	if err != nil {
		return time.Time{}, pg.Interpret(err, "find the oldest running attempt or unanswered request")
	}
	return next, nil
}
