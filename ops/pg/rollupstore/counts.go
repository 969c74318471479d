package rollupstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// The money of an operation in micro-units of its currency: refunds are in the currency's
// minor unit (minorMicros), LLM calls carry their cost in micro-units of the price table's
// currency, which their usage record names (llmCurrency).
const opCurrency = `CASE WHEN o.kind = 'refund' THEN o.currency ELSE ` + llmCurrency + ` END`

var opMicros = `CASE WHEN o.kind = 'refund' THEN ` + minorMicros("o.amount_cents", "o.currency") + ` ELSE o.cost_micros END`

// windowOps lists the operations created in the window, each with the columns the counts
// read of it, from one scan of operations_created_idx. The window's operations are counted
// from it, and the client requests and attempts of the window are joined to it by a hash:
// nearly all of them belong to these operations, and a join per row probed operations_pkey
// and fetched the operation's wide row once for each request and each attempt. The few
// that belong to another operation (a replay or a retry of an older one, a request stamped
// just before the window of an operation created in it) look theirs up by id (opByID), so
// every number stays exact whatever the rows' times. The charges do not join it: the
// planner knows nothing of the ids a CTE holds, and hashed every charge to join them.
var windowOps = `w AS MATERIALIZED (
	SELECT o.id, o.created_at, o.tenant_id, o.kind, o.provider, o.api, o.status,
		` + opCurrency + ` AS currency, ` + opMicros + ` AS micros
	FROM operations o WHERE o.created_at >= @from AND o.created_at < @to
)`

// opFilter is the table's filter on the operation o of a counted row; a row of no
// operation has o's columns NULL and passes only an empty filter.
const opFilter = `(@tenant = 0 OR o.tenant_id = @tenant) AND (@kind = '' OR o.kind = @kind) AND (@provider = '' OR o.provider = @provider)
		AND (@api = '' OR o.api = @api)`

// chargesCTE lists the charged provider records the table counts, each with the API its
// operation called (empty for a charge of no operation, or of one that calls none) and the
// time that places it in a window: the creation of its operation, so a charge sits in the
// same row as the operation it pays for, or its own time for a charge with no operation. n
// numbers the charges of one operation; n > 1 is a double charge. micros is the charge's
// money in micro-units of its currency; a generation an LLM lookup found carries no amount
// of its own (a stored completion has no price on it), so it costs what its operation's
// stored generation cost, in its price table's currency (llmCurrency), as the last half counts it. The charges of the window's
// operations (ch, by operations_created_idx and provider_charges_operation_idx) are
// numbered only where an operation has more than one (multi): nearly every operation has
// one charge or none, and numbering them all sorted every charge of the window by its
// operation. The orphans are served by provider_charges_orphan_idx; the last half adds the
// double generations of LLM operations (pg.DoubleGenerations). Whether a charge's operation
// is in multi is asked of a hashed list (an ANY the planner does not turn into a join):
// as a join on statistics older than the window it looped over multi once per charge.
var chargesCTE = `ch AS MATERIALIZED (
	SELECT o.created_at AS at, o.tenant_id, o.kind, pc.provider, o.api,
		CASE WHEN ` + llmUnpriced + ` THEN ` + llmCurrency + ` ELSE pc.currency END AS currency, pc.amount_cents,
		CASE WHEN ` + llmUnpriced + ` THEN o.cost_micros ELSE ` + minorMicros("pc.amount_cents", "pc.currency") + ` END AS micros,
		pc.charge_ref, pc.status, pc.operation_id, pc.charged_at, pc.id
	FROM operations o JOIN provider_charges pc ON pc.operation_id = o.id
	WHERE o.created_at >= @from AND o.created_at < @to AND pc.status IN ` + pg.ChargedStatuses + ` AND ` + opFilter + `
), multi AS (
	SELECT ch.operation_id FROM ch GROUP BY 1 HAVING count(*) > 1
), c AS (
	SELECT ch.at, ch.tenant_id, ch.kind, ch.provider, ch.api, ch.currency, ch.amount_cents, ch.micros, ch.charge_ref, ch.status,
		ch.operation_id, 1::bigint AS n
	FROM ch WHERE NOT (ch.operation_id = ANY (SELECT multi.operation_id FROM multi))
	UNION ALL
	SELECT ch.at, ch.tenant_id, ch.kind, ch.provider, ch.api, ch.currency, ch.amount_cents, ch.micros, ch.charge_ref, ch.status,
		ch.operation_id, row_number() OVER (PARTITION BY ch.operation_id ORDER BY ch.charged_at, ch.id)
	FROM ch WHERE (ch.operation_id = ANY (SELECT multi.operation_id FROM multi)) IS TRUE
	UNION ALL
	SELECT pc.charged_at, coalesce(pc.tenant_id, 0), '', pc.provider, '', pc.currency, pc.amount_cents, ` + minorMicros("pc.amount_cents", "pc.currency") + `,
		pc.charge_ref, pc.status, NULL, 1
	FROM provider_charges pc
	WHERE pc.operation_id IS NULL AND pc.charged_at >= @from AND pc.charged_at < @to AND pc.status IN ` + pg.ChargedStatuses + `
		AND (@tenant = 0 OR pc.tenant_id = @tenant) AND @kind = '' AND (@provider = '' OR pc.provider = @provider) AND @api = ''
	UNION ALL
	SELECT o.created_at, o.tenant_id, o.kind, o.provider, o.api, ` + llmCurrency + `, 0, o.cost_micros,
		e.ref || '#' || g.n, 'succeeded', o.id, g.n + 1
	FROM recon_exceptions e JOIN operations o ON o.id = e.operation_id
		CROSS JOIN LATERAL generate_series(1, ` + pg.ExtraGenerations + `) AS g(n)
	WHERE ` + pg.DoubleGenerations + ` AND o.created_at >= @from AND o.created_at < @to AND ` + opFilter + `
)`

// cancelAnswers are the answers of a cancel (ops.Answer.Cancel), in SQL.
const cancelAnswers = `('cancelled', 'cancel_too_late', 'cancel_failed', 'cancel_refused')`

// admittedRequest says a client request cr asked for a paid side effect
// (recon.MetricsRow.Admitted): neither refused at the door nor a cancel. An unanswered one
// (NULL) was admitted, as the counts take it.
const admittedRequest = `cr.answer IS DISTINCT FROM 'rejected' AND (cr.answer IN ` + cancelAnswers + `) IS NOT TRUE`

// llmCurrency is the currency of LLM operation o's cost: the price table's, which the
// usage record of the call names; dollars, the table's default, where it names none (a
// call without a known cost, or recorded before the record named it). Reading it as
// dollars whatever the table said would add euros to dollars (ops rule 12).
const llmCurrency = `coalesce(nullif(o.currency, ''), nullif(o.usage->>'currency', ''), 'usd')`

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

// querier is what the counting queries run on: a transaction (the rollup job's, a read's).
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// noJITSQL turns off the server's JIT compilation for the rest of the transaction. The
// counting statements join the window's operations as a CTE, of which the planner has no
// statistics, so it may take the one-to-one join of the window's requests to it for thirty
// times their number: a count of 6,000 calls was costed at 2.9 million, past every JIT
// threshold, and the server compiled 145 functions with inlining and optimization before
// running it, 1.5 to 2.8 s of a core for a statement that runs in 150 ms. In the gateway benchmark that was a
// rollup pass every 15 s while it lasted, and the calls answered meanwhile waited for the
// CPU. No statement of the counting reads enough rows for compiled code to pay that back.
const noJITSQL = `SELECT set_config('jit', 'off', true)`

// noJIT runs noJITSQL in q's transaction.
func noJIT(ctx context.Context, q querier) error {
	if err := q.QueryRow(ctx, noJITSQL).Scan(nil); err != nil {
		return pg.Interpret(err, "plan the counts")
	}
	return nil
}

// ReconMetrics implements recon.MetricsStore: one index-served aggregate query of four
// parts (client requests, operations, attempts, charges), merged by row. Every number
// counts recorded rows; nothing is estimated.
func (s *Store) ReconMetrics(ctx context.Context, f recon.MetricsFilter) ([]recon.MetricsRow, error) {
	if err := checkMetricsFilter(f); err != nil {
		return nil, err
	}
	var rows []recon.MetricsRow
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := noJIT(ctx, tx); err != nil {
			return err
		}
		var err error
		rows, err = countRaw(ctx, tx, f)
		return err
	})
	return rows, err
}

// countRaw counts the raw rows of f's window in buckets of f.Bucket, which may be any whole
// number of seconds: the rollup job counts per minute with it. It is the one definition of
// every number; the rollups store what it returned. Its callers run it without JIT
// compilation (noJITSQL).
func countRaw(ctx context.Context, q querier, f recon.MetricsFilter) ([]recon.MetricsRow, error) {
	rs, err := q.Query(ctx, countSQL, metricsArgs(f))
	if err != nil {
		return nil, pg.Interpret(err, "count the raw rows")
	}
	defer rs.Close()
	rows := metricsRows{}
	var c countRow
	for rs.Next() {
		if err := rs.Scan(&c.part, &c.bucket, &c.tenant, &c.kind, &c.provider, &c.api, &c.currency,
			&c.v[0], &c.v[1], &c.v[2], &c.v[3], &c.v[4], &c.v[5], &c.v[6], &c.v[7], &c.v[8], &c.v[9], &c.v[10]); err != nil {
			return nil, pg.Interpret(err, "count the raw rows")
		}
		if err := c.addTo(rows); err != nil {
			return nil, err
		}
	}
	if err := rs.Err(); err != nil {
		return nil, pg.Interpret(err, "count the raw rows")
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

// The parts of countSQL, the first column of each of its rows.
const (
	partRequests = iota + 1
	partOperations
	partAttempts
	partCharges
)

// countRow is one row of countSQL: the part that counted it, its group, and up to ten
// numbers, in the order the part's SELECT lists them.
type countRow struct {
	part                          int
	bucket                        time.Time
	tenant                        int64
	kind, provider, api, currency string
	v                             [11]int64
}

// addTo adds the row's numbers to its row of the table.
func (c *countRow) addTo(rows metricsRows) error {
	r := rows.row(c.bucket, c.tenant, c.kind, c.provider, c.api)
	v := c.v
	switch c.part {
	case partRequests:
		r.ClientRequests += v[0]
		r.Duplicates += v[1]
		r.Replays += v[2]
		r.Saved.Add(c.currency, v[3])
		r.InProgress += v[4]
		r.Conflicts += v[5]
		r.Checking += v[6]
		r.Rejected += v[7]
		r.Cancels += v[8]
		r.BudgetRefused += v[9]
		r.BudgetTooSmall += v[10]
	case partOperations:
		r.Operations += v[0]
		r.Succeeded += v[1]
		r.Failed += v[2]
		r.Unknown += v[3]
		r.Expired += v[4]
	case partAttempts:
		r.Attempts += v[0]
		r.AttemptsSent += v[1]
		r.Timeouts += v[2]
	case partCharges:
		r.Charges += v[0]
		r.Orphans += v[1]
		r.DoubleCharges += v[2]
		r.Lost.Add(c.currency, v[3])
	default:
		return fmt.Errorf("count the raw rows: a row of no part %d", c.part)
	}
	return nil
}

// opByID is the operation of the row of alias row when windowOps (joined as w) does not
// hold it, looked up by its id. The lateral subquery is not flattened (LIMIT 1: the id is
// the primary key), so it is a probe of operations_pkey per row that the condition on w.id
// lets run only for a row that w does not hold, and none for a row of no operation; the
// planner cannot tell how few those are, and as a join it scanned every operation.
func opByID(row string) string {
	return `SELECT o.tenant_id, o.kind, o.provider, o.api, o.currency, o.amount_cents, o.cost_micros, o.usage
		FROM operations o WHERE o.id = ` + row + `.operation_id AND w.id IS NULL LIMIT 1`
}

// countSQL is the one statement of countRaw: every row it counts, each with the part that
// counts it (partRequests...), its group and its numbers, summed by group in one aggregate
// (hashed: a few groups of many rows). Each part's numbers are listed where it adds them (countRow.addTo):
//
//   - client requests by the time they were received, with how each was answered, the
//     money a replay saved, and whether a refusal was for its tenant's LLM budget;
//   - operations by the time they were created, with their statuses;
//   - attempts by the time they started: all, those that left Settle, and those that timed
//     out;
//   - the charges of chargesCTE: all, orphans and double charges, with the money double
//     charges lost.
//
// A request or an attempt of an operation outside windowOps (or a request of none) looks
// its operation up (opByID). A flag counts as 1 and an unknown one (NULL) as nothing, as a
// filtered count would.
var countSQL = `WITH ` + windowOps + `, ` + chargesCTE + `, counted AS (
	SELECT ` + fmt.Sprint(partRequests) + ` AS part, ` + metricsBin("cr.received_at") + ` AS bin, cr.tenant_id, cr.kind,
		coalesce(w.provider, o.provider, '') AS provider, coalesce(w.api, o.api, '') AS api, coalesce(w.currency, ` + opCurrency + `) AS currency,
		1 AS v0, cr.duplicate::int AS v1, (cr.answer = 'replayed')::int AS v2,
		CASE WHEN cr.answer = 'replayed' THEN coalesce(w.micros, ` + opMicros + `) END AS v3,
		(cr.answer = 'in_progress')::int AS v4, (cr.answer = 'conflict')::int AS v5, (cr.answer = 'checking')::int AS v6,
		(cr.answer = 'rejected')::int AS v7, (cr.answer IN ` + cancelAnswers + `)::int AS v8,
		(cr.answer = 'rejected' AND cr.reason = '` + llm.ReasonBudgetSpent + `')::int AS v9,
		(cr.answer = 'rejected' AND cr.reason = '` + llm.ReasonBudgetTooSmall + `')::int AS v10
	FROM client_requests cr LEFT JOIN w ON w.id = cr.operation_id LEFT JOIN LATERAL (` + opByID("cr") + `) o ON true
	WHERE cr.received_at >= @from AND cr.received_at < @to AND (@tenant = 0 OR cr.tenant_id = @tenant) AND (@kind = '' OR cr.kind = @kind)
		AND (@provider = '' OR coalesce(w.provider, o.provider) = @provider) AND (@api = '' OR coalesce(w.api, o.api) = @api)
	UNION ALL
	SELECT ` + fmt.Sprint(partOperations) + `, ` + metricsBin("o.created_at") + `, o.tenant_id, o.kind, o.provider, o.api, '',
		1, (o.status = 'succeeded')::int, (o.status = 'failed')::int, (o.status = 'unknown')::int, (o.status = 'expired')::int, 0, 0, 0, 0, 0, 0
	FROM w o WHERE ` + opFilter + `
	UNION ALL
	SELECT ` + fmt.Sprint(partAttempts) + `, ` + metricsBin("a.started_at") + `, coalesce(w.tenant_id, o.tenant_id), coalesce(w.kind, o.kind),
		coalesce(w.provider, o.provider), coalesce(w.api, o.api), '',
		1, (a.outcome IS DISTINCT FROM 'not_sent')::int, (a.outcome = 'timeout')::int, 0, 0, 0, 0, 0, 0, 0, 0
	FROM attempts a LEFT JOIN w ON w.id = a.operation_id LEFT JOIN LATERAL (` + opByID("a") + `) o ON true
	WHERE a.started_at >= @from AND a.started_at < @to AND (w.id IS NOT NULL OR o.tenant_id IS NOT NULL)
		AND (@tenant = 0 OR coalesce(w.tenant_id, o.tenant_id) = @tenant) AND (@kind = '' OR coalesce(w.kind, o.kind) = @kind)
		AND (@provider = '' OR coalesce(w.provider, o.provider) = @provider) AND (@api = '' OR coalesce(w.api, o.api) = @api)
	UNION ALL
	SELECT ` + fmt.Sprint(partCharges) + `, ` + metricsBin("c.at") + `, c.tenant_id, c.kind, c.provider, c.api, c.currency,
		1, (c.operation_id IS NULL)::int, (c.n > 1)::int, CASE WHEN c.n > 1 THEN c.micros ELSE 0 END, 0, 0, 0, 0, 0, 0, 0
	FROM c
)
SELECT part, bin, tenant_id, kind, provider, api, currency, sum(v0), coalesce(sum(v1), 0), coalesce(sum(v2), 0),
	coalesce(sum(v3), 0)::bigint, coalesce(sum(v4), 0), coalesce(sum(v5), 0), coalesce(sum(v6), 0), coalesce(sum(v7), 0),
	coalesce(sum(v8), 0), coalesce(sum(v9), 0), coalesce(sum(v10), 0)
FROM counted GROUP BY 1, 2, 3, 4, 5, 6, 7`

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
	case recon.MeasureClientRequests, recon.MeasureAdmitted, recon.MeasureDuplicates, recon.MeasureReplays:
		cond := map[recon.Measure]string{recon.MeasureClientRequests: "true", recon.MeasureDuplicates: "cr.duplicate",
			recon.MeasureAdmitted: admittedRequest, recon.MeasureReplays: "cr.answer = 'replayed'"}[f.Measure]
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
