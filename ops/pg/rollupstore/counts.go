package rollupstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// The money of an operation in micro-units of its currency: refunds are in cents, LLM calls
// carry their cost in micro-dollars.
const (
	opCurrency = `CASE WHEN o.kind = 'refund' THEN o.currency ELSE coalesce(nullif(o.currency, ''), 'usd') END`
	opMicros   = `CASE WHEN o.kind = 'refund' THEN o.amount_cents * 10000 ELSE o.cost_micros END`
)

// chargesCTE lists the charged provider records the table counts, each with the API its
// operation called (empty for a charge of no operation, or of one that calls none) and the
// time that places it in a window: the creation of its operation, so a charge sits in the
// same row as the operation it pays for, or its own time for a charge with no operation. n
// numbers the charges of one operation; n > 1 is a double charge. micros is the charge's
// money in micro-units of its currency; a generation an LLM lookup found carries no amount
// of its own (a stored completion has no price on it), so it costs what its operation's
// stored generation cost, in USD, as the third half counts it. The first two halves are
// index-served: the first by operations_created_idx and provider_charges_operation_idx, the
// second by provider_charges_orphan_idx. The third adds the double generations of LLM
// operations (pg.DoubleGenerations).
const chargesCTE = `c AS (
	SELECT o.created_at AS at, o.tenant_id, o.kind, pc.provider, o.api,
		CASE WHEN ` + llmUnpriced + ` THEN 'usd' ELSE pc.currency END AS currency, pc.amount_cents,
		CASE WHEN ` + llmUnpriced + ` THEN o.cost_micros ELSE pc.amount_cents * 10000 END AS micros,
		pc.charge_ref, pc.status, pc.operation_id,
		row_number() OVER (PARTITION BY pc.operation_id ORDER BY pc.charged_at, pc.id) AS n
	FROM operations o JOIN provider_charges pc ON pc.operation_id = o.id
	WHERE o.created_at >= @from AND o.created_at < @to AND pc.status IN ` + pg.ChargedStatuses + `
		AND (@tenant = 0 OR o.tenant_id = @tenant) AND (@kind = '' OR o.kind = @kind) AND (@provider = '' OR o.provider = @provider)
		AND (@api = '' OR o.api = @api)
	UNION ALL
	SELECT pc.charged_at, coalesce(pc.tenant_id, 0), '', pc.provider, '', pc.currency, pc.amount_cents, pc.amount_cents * 10000,
		pc.charge_ref, pc.status, NULL, 1
	FROM provider_charges pc
	WHERE pc.operation_id IS NULL AND pc.charged_at >= @from AND pc.charged_at < @to AND pc.status IN ` + pg.ChargedStatuses + `
		AND (@tenant = 0 OR pc.tenant_id = @tenant) AND @kind = '' AND (@provider = '' OR pc.provider = @provider) AND @api = ''
	UNION ALL
	SELECT o.created_at, o.tenant_id, o.kind, o.provider, o.api, 'usd', 0, o.cost_micros,
		e.ref || '#' || g.n, 'succeeded', o.id, g.n + 1
	FROM recon_exceptions e JOIN operations o ON o.id = e.operation_id
		CROSS JOIN LATERAL generate_series(1, ` + pg.ExtraGenerations + `) AS g(n)
	WHERE ` + pg.DoubleGenerations + ` AND o.created_at >= @from AND o.created_at < @to
		AND (@tenant = 0 OR o.tenant_id = @tenant) AND (@kind = '' OR o.kind = @kind) AND (@provider = '' OR o.provider = @provider)
		AND (@api = '' OR o.api = @api)
)`

// llmUnpriced says a charge pc of operation o is a generation found at an LLM provider,
// recorded without an amount.
const llmUnpriced = `(o.kind IN ('llm_call', 'llm_job') AND pc.amount_cents = 0)`

func metricsArgs(f recon.MetricsFilter) pgx.NamedArgs {
	return pgx.NamedArgs{"from": f.From, "to": f.To, "secs": f.Bucket.Seconds(), "tenant": f.TenantID,
		"kind": string(f.Kind), "provider": f.Provider, "api": f.API}
}

func checkMetricsFilter(f recon.MetricsFilter) error {
	if !f.To.After(f.From) {
		return ops.Errorf(ops.EINVALID, "The report window is reversed or empty.")
	}
	if f.Bucket != time.Hour && f.Bucket != 24*time.Hour {
		return ops.Errorf(ops.EINVALID, "Rows are per hour or per day.")
	}
	if n := f.To.Sub(f.From) / f.Bucket; n > 24*93 {
		return ops.Errorf(ops.EINVALID, "The report window holds %d rows per group; choose a shorter range or daily rows.", n)
	}
	return nil
}

// querier is what the counting queries run on: the pool, or the rollup job's transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReconMetrics implements recon.MetricsStore: four index-served aggregate queries (client
// requests, operations, attempts, charges), merged by row. Every number counts recorded
// rows; nothing is estimated.
func (s *Store) ReconMetrics(ctx context.Context, f recon.MetricsFilter) ([]recon.MetricsRow, error) {
	if err := checkMetricsFilter(f); err != nil {
		return nil, err
	}
	return countRaw(ctx, s.db.Pool, f)
}

// countRaw counts the raw rows of f's window in buckets of f.Bucket, which may be any whole
// number of seconds: the rollup job counts per minute with it. It is the one definition of
// every number; the rollups store what it returned.
func countRaw(ctx context.Context, q querier, f recon.MetricsFilter) ([]recon.MetricsRow, error) {
	args := metricsArgs(f)
	rows := metricsRows{}
	for _, qu := range countQueries {
		if err := qu.run(ctx, q, args, rows); err != nil {
			return nil, pg.Interpret(err, qu.what)
		}
	}
	return sortedRows(rows), nil
}

// metricsRows gathers the table's rows by key while the counting queries add to them.
type metricsRows map[recon.MetricsKey]*recon.MetricsRow

// row is the row for a bucket, tenant, kind, provider and API, made empty on first use.
func (rows metricsRows) row(b time.Time, tenant int64, kind, provider, api string) *recon.MetricsRow {
	k := recon.MetricsKey{Bucket: b.UTC(), TenantID: tenant, Kind: ops.Kind(kind), Provider: provider, API: api}
	r := rows[k]
	if r == nil {
		r = &recon.MetricsRow{MetricsKey: k, Saved: recon.Money{}, Lost: recon.Money{}}
		rows[k] = r
	}
	return r
}

// metricsBin is the SQL for the start of the bucket of @secs seconds that col falls in.
func metricsBin(col string) string {
	return `date_bin(make_interval(secs => @secs), ` + col + `, ` + pg.BinOrigin + `)`
}

// countQuery is one of the queries countRaw runs: what it counts (for its errors), its SQL,
// and how one of its result rows adds to the table.
type countQuery struct {
	what string
	sql  string
	add  func(metricsRows, pgx.Rows) error
}

// countQueries are the four index-served aggregate queries behind every number of the table.
var countQueries = []countQuery{
	{"count client requests", countRequestsSQL, metricsRows.addRequests},
	{"count operations", countOperationsSQL, metricsRows.addOperations},
	{"count attempts", countAttemptsSQL, metricsRows.addAttempts},
	{"count charges", countChargesSQL, metricsRows.addCharges},
}

// run adds every result row of the query to rows.
func (qu countQuery) run(ctx context.Context, q querier, args pgx.NamedArgs, rows metricsRows) error {
	rs, err := q.Query(ctx, qu.sql, args)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := qu.add(rows, rs); err != nil {
			return err
		}
	}
	return rs.Err()
}

// countRequestsSQL counts client requests by the time they were received, with how each
// was answered and the money a replay saved.
var countRequestsSQL = `
SELECT ` + metricsBin("cr.received_at") + `, cr.tenant_id, cr.kind, coalesce(o.provider, ''), coalesce(o.api, ''), coalesce(` + opCurrency + `, ''),
	count(*), count(*) FILTER (WHERE cr.duplicate), count(*) FILTER (WHERE cr.answer = 'replayed'),
	coalesce(sum(` + opMicros + `) FILTER (WHERE cr.answer = 'replayed'), 0),
	count(*) FILTER (WHERE cr.answer = 'in_progress'), count(*) FILTER (WHERE cr.answer = 'conflict'),
	count(*) FILTER (WHERE cr.answer = 'checking'), count(*) FILTER (WHERE cr.answer = 'rejected')
FROM client_requests cr LEFT JOIN operations o ON o.id = cr.operation_id
WHERE cr.received_at >= @from AND cr.received_at < @to
	AND (@tenant = 0 OR cr.tenant_id = @tenant) AND (@kind = '' OR cr.kind = @kind) AND (@provider = '' OR o.provider = @provider)
	AND (@api = '' OR o.api = @api)
GROUP BY 1, 2, 3, 4, 5, 6`

func (rows metricsRows) addRequests(rs pgx.Rows) error {
	var b time.Time
	var tenant, n, dup, rep, saved, inProgress, conflicts, checking, rejected int64
	var kind, provider, api, currency string
	if err := rs.Scan(&b, &tenant, &kind, &provider, &api, &currency, &n, &dup, &rep, &saved, &inProgress, &conflicts, &checking, &rejected); err != nil {
		return err
	}
	r := rows.row(b, tenant, kind, provider, api)
	r.ClientRequests += n
	r.Duplicates += dup
	r.Replays += rep
	r.InProgress += inProgress
	r.Conflicts += conflicts
	r.Checking += checking
	r.Rejected += rejected
	r.Saved.Add(currency, saved)
	return nil
}

// countOperationsSQL counts operations by the time they were created, with their statuses.
var countOperationsSQL = `
SELECT ` + metricsBin("o.created_at") + `, o.tenant_id, o.kind, o.provider, o.api, count(*), count(*) FILTER (WHERE o.status = 'succeeded'),
	count(*) FILTER (WHERE o.status = 'failed'), count(*) FILTER (WHERE o.status = 'unknown'), count(*) FILTER (WHERE o.status = 'expired')
FROM operations o
WHERE o.created_at >= @from AND o.created_at < @to
	AND (@tenant = 0 OR o.tenant_id = @tenant) AND (@kind = '' OR o.kind = @kind) AND (@provider = '' OR o.provider = @provider)
	AND (@api = '' OR o.api = @api)
GROUP BY 1, 2, 3, 4, 5`

func (rows metricsRows) addOperations(rs pgx.Rows) error {
	var b time.Time
	var tenant, n, ok, failed, unknown, expired int64
	var kind, provider, api string
	if err := rs.Scan(&b, &tenant, &kind, &provider, &api, &n, &ok, &failed, &unknown, &expired); err != nil {
		return err
	}
	r := rows.row(b, tenant, kind, provider, api)
	r.Operations += n
	r.Succeeded += ok
	r.Failed += failed
	r.Unknown += unknown
	r.Expired += expired
	return nil
}

// countAttemptsSQL counts attempts by the time they started: all, those that left Settle,
// and those that timed out.
var countAttemptsSQL = `
SELECT ` + metricsBin("a.started_at") + `, o.tenant_id, o.kind, o.provider, o.api, count(*),
	count(*) FILTER (WHERE a.outcome IS DISTINCT FROM 'not_sent'), count(*) FILTER (WHERE a.outcome = 'timeout')
FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.started_at >= @from AND a.started_at < @to
	AND (@tenant = 0 OR o.tenant_id = @tenant) AND (@kind = '' OR o.kind = @kind) AND (@provider = '' OR o.provider = @provider)
	AND (@api = '' OR o.api = @api)
GROUP BY 1, 2, 3, 4, 5`

func (rows metricsRows) addAttempts(rs pgx.Rows) error {
	var b time.Time
	var tenant, started, sent, timeouts int64
	var kind, provider, api string
	if err := rs.Scan(&b, &tenant, &kind, &provider, &api, &started, &sent, &timeouts); err != nil {
		return err
	}
	r := rows.row(b, tenant, kind, provider, api)
	r.Attempts += started
	r.AttemptsSent += sent
	r.Timeouts += timeouts
	return nil
}

// countChargesSQL counts the charges of chargesCTE: all, orphans and double charges, with
// the money double charges lost.
var countChargesSQL = `WITH ` + chargesCTE + `
SELECT ` + metricsBin("c.at") + `, c.tenant_id, c.kind, c.provider, c.api, c.currency,
	count(*), count(*) FILTER (WHERE c.operation_id IS NULL), count(*) FILTER (WHERE c.n > 1),
	coalesce(sum(c.micros) FILTER (WHERE c.n > 1), 0)
FROM c GROUP BY 1, 2, 3, 4, 5, 6`

func (rows metricsRows) addCharges(rs pgx.Rows) error {
	var b time.Time
	var tenant, n, orphans, doubles, lost int64
	var kind, provider, api, currency string
	if err := rs.Scan(&b, &tenant, &kind, &provider, &api, &currency, &n, &orphans, &doubles, &lost); err != nil {
		return err
	}
	r := rows.row(b, tenant, kind, provider, api)
	r.Charges += n
	r.Orphans += orphans
	r.DoubleCharges += doubles
	r.Lost.Add(currency, lost)
	return nil
}

// sortedRows returns the rows by window, tenant, kind, provider and API.
func sortedRows(rows map[recon.MetricsKey]*recon.MetricsRow) []recon.MetricsRow {
	out := make([]recon.MetricsRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case !a.Bucket.Equal(b.Bucket):
			return a.Bucket.Before(b.Bucket)
		case a.TenantID != b.TenantID:
			return a.TenantID < b.TenantID
		case a.Kind != b.Kind:
			return a.Kind < b.Kind
		case a.Provider != b.Provider:
			return a.Provider < b.Provider
		default:
			return a.API < b.API
		}
	})
	return out
}

// drillLimit bounds a drill-down page; the table's number says how many there are in all.
const drillLimit = 500

// ReconDrill implements recon.MetricsStore: the recorded rows behind one number of the table,
// selected by the same conditions that counted them.
func (s *Store) ReconDrill(ctx context.Context, f recon.DrillFilter) ([]recon.DrillRow, error) {
	if !f.Measure.Valid() {
		return nil, ops.Errorf(ops.EINVALID, "There is no measure %q.", f.Measure)
	}
	if f.Width != time.Hour && f.Width != 24*time.Hour {
		return nil, ops.Errorf(ops.EINVALID, "Rows are per hour or per day.")
	}
	if f.Limit <= 0 || f.Limit > drillLimit {
		f.Limit = drillLimit
	}
	args := pgx.NamedArgs{"from": f.Bucket, "to": f.Bucket.Add(f.Width), "tenant": f.TenantID, "kind": string(f.Kind),
		"provider": f.Provider, "api": f.API, "limit": f.Limit}
	var sql string
	switch f.Measure {
	case recon.MeasureClientRequests, recon.MeasureDuplicates, recon.MeasureReplays:
		cond := map[recon.Measure]string{recon.MeasureClientRequests: "true", recon.MeasureDuplicates: "cr.duplicate",
			recon.MeasureReplays: "cr.answer = 'replayed'"}[f.Measure]
		sql = `
SELECT cr.received_at, coalesce(cr.operation_id::text, ''), cr.tenant_id, cr.kind, coalesce(o.provider, ''), cr.request_ref,
	coalesce(cr.answer, 'unanswered'), coalesce(o.amount_cents, 0), coalesce(o.currency, '')
FROM client_requests cr LEFT JOIN operations o ON o.id = cr.operation_id
WHERE cr.received_at >= @from AND cr.received_at < @to AND cr.tenant_id = @tenant AND cr.kind = @kind
	AND coalesce(o.provider, '') = @provider AND coalesce(o.api, '') = @api AND ` + cond + `
ORDER BY cr.received_at, cr.id LIMIT @limit`
	case recon.MeasureOperations, recon.MeasureSucceeded:
		cond := "true"
		if f.Measure == recon.MeasureSucceeded {
			cond = "o.status = 'succeeded'"
		}
		sql = `
SELECT o.created_at, o.id::text, o.tenant_id, o.kind, o.provider, coalesce(nullif(o.order_ref, ''), o.provider_ref), o.status,
	o.amount_cents, o.currency
FROM operations o
WHERE o.created_at >= @from AND o.created_at < @to AND o.tenant_id = @tenant AND o.kind = @kind AND o.provider = @provider
	AND o.api = @api AND ` + cond + `
ORDER BY o.created_at, o.id LIMIT @limit`
	case recon.MeasureAttempts, recon.MeasureTimeouts:
		cond := "a.outcome IS DISTINCT FROM 'not_sent'"
		if f.Measure == recon.MeasureTimeouts {
			cond = "a.outcome = 'timeout'"
		}
		sql = `
SELECT a.started_at, o.id::text, o.tenant_id, o.kind, o.provider, 'attempt ' || a.n,
	coalesce(a.outcome, 'in flight') || CASE WHEN a.error_code <> '' THEN ' (' || a.error_code || ')' ELSE '' END,
	o.amount_cents, o.currency
FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.started_at >= @from AND a.started_at < @to AND o.tenant_id = @tenant AND o.kind = @kind AND o.provider = @provider
	AND o.api = @api AND ` + cond + `
ORDER BY a.started_at, a.id LIMIT @limit`
	default:
		cond := map[recon.Measure]string{recon.MeasureCharges: "true", recon.MeasureOrphans: "c.operation_id IS NULL",
			recon.MeasureDoubleCharges: "c.n > 1"}[f.Measure]
		// The CTE's own filters take "any" for zero values; the cell wants exact matches.
		sql = `WITH ` + chargesCTE + `
SELECT c.at, coalesce(c.operation_id::text, ''), c.tenant_id, c.kind, c.provider, c.charge_ref, c.status, c.amount_cents, c.currency
FROM c WHERE c.tenant_id = @tenant AND c.kind = @kind AND c.provider = @provider AND c.api = @api AND ` + cond + `
ORDER BY c.at, c.charge_ref LIMIT @limit`
	}
	rows, err := s.db.Pool.Query(ctx, sql, args)
	if err != nil {
		return nil, pg.Interpret(err, fmt.Sprintf("drill into %s", f.Measure))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.DrillRow, error) {
		var d recon.DrillRow
		var kind string
		err := r.Scan(&d.At, &d.OperationID, &d.TenantID, &kind, &d.Provider, &d.Ref, &d.Detail, &d.AmountCents, &d.Currency)
		d.Kind = ops.Kind(kind)
		return d, err
	})
	return out, pg.Interpret(err, fmt.Sprintf("drill into %s", f.Measure))
}
