package rollupstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// minutesKept refuses a read that needs minute rows from before the first one kept.
func minutesKept(ctx context.Context, q rowQuerier, needFrom time.Time) error {
	st, err := readRollupState(ctx, q)
	if err != nil {
		return err
	}
	if !st.MinutesFrom.IsZero() && needFrom.Before(st.MinutesFrom) {
		return ops.Errorf(ops.EINVALID, "Minute detail is kept from %s UTC on; for earlier times choose wider rows on whole hours.",
			st.MinutesFrom.Format("2006-01-02 15:04"))
	}
	return nil
}

// rollupBuckets are the widths the rollups can be read in: whole minutes up to an hour
// that divide it, an hour, a day.
var rollupBuckets = map[time.Duration]bool{time.Minute: true, 5 * time.Minute: true, 10 * time.Minute: true,
	15 * time.Minute: true, 30 * time.Minute: true, time.Hour: true, 24 * time.Hour: true}

// checkRollupFilter refuses a window or bucket the rollups cannot answer exactly, and a
// window holding too many rows to show.
func checkRollupFilter(w recon.Window, bucket time.Duration) error {
	switch {
	case !w.To.After(w.From):
		return ops.Errorf(ops.EINVALID, "The report window is reversed or empty.")
	case !w.From.Equal(w.From.Truncate(time.Minute)) || !w.To.Equal(w.To.Truncate(time.Minute)):
		return ops.Errorf(ops.EINVALID, "The report window starts and ends on whole minutes.")
	case !rollupBuckets[bucket]:
		return ops.Errorf(ops.EINVALID, "Rows are per 1, 5, 10, 15 or 30 minutes, per hour or per day.")
	}
	if n := w.To.Sub(w.From) / bucket; n > 24*93 {
		return ops.Errorf(ops.EINVALID, "The report window holds %d rows per group; choose a shorter range or wider rows.", n)
	}
	return nil
}

// rollupRange is the rollup rows a window reads: rows of the coarsest level that fits the
// bucket (@lwidth: hours, or quarter hours) for the whole units of that level inside the
// window, from @lfrom to @lto, and minute rows for the rest. It is a subquery with the row's
// start and key columns plus cols, filtered by @tenant, @kind, @provider and @api.
func rollupRange(table, cols string) string {
	filter := ` AND (@tenant = 0 OR tenant_id = @tenant) AND (@kind = '' OR kind = @kind) AND (@provider = '' OR provider = @provider)
	AND (@api = '' OR api = @api)`
	return `(SELECT start, tenant_id, kind, provider, api` + cols + ` FROM ` + table + `
	WHERE width_seconds = @lwidth AND start >= @lfrom AND start < @lto` + filter + `
	UNION ALL
	SELECT start, tenant_id, kind, provider, api` + cols + ` FROM ` + table + `
	WHERE width_seconds = 60 AND start >= @from AND start < @lfrom` + filter + `
	UNION ALL
	SELECT start, tenant_id, kind, provider, api` + cols + ` FROM ` + table + `
	WHERE width_seconds = 60 AND start >= @lto AND start < @to` + filter + `) r`
}

func rollupArgs(f recon.MetricsFilter) pgx.NamedArgs {
	args := metricsArgs(f)
	// A level serves the buckets it divides: hours for hours and days, quarter hours for 15
	// and 30 minutes (and for a window too short to hold a whole hour). Narrower buckets
	// (1, 5, 10 minutes) read minute rows only, which the empty range @lfrom = @lto = @to
	// gives.
	args["lwidth"], args["lfrom"], args["lto"] = 60, f.To, f.To
	for i := len(coarseLevels) - 1; i >= 0; i-- {
		lv := coarseLevels[i]
		if f.Bucket%lv != 0 {
			continue
		}
		lfrom, lto := f.From.Add(lv-time.Nanosecond).Truncate(lv), f.To.Truncate(lv)
		if lto.After(lfrom) {
			args["lwidth"], args["lfrom"], args["lto"] = int(lv/time.Second), lfrom, lto
			break
		}
	}
	return args
}

// rollupReadSettings are the planner's settings for a read of the rollups. Over a year of
// rollups the planner misjudges a page's few thousand rows: it takes the width and the window
// for independent, while the minute rows, most of the table, all lie in the last weeks, so
// it expects about six times a month of hours. With that estimate it started two parallel
// workers (150 ms of a 2 ms read on two cores) and sorted the rows to group them, where
// hashing them is 1.4x faster (docs/benchmarks/journal.md). A page's read never gains from workers, and
// its groups, a few thousand at most, always fit a hash.
const rollupReadSettings = `SELECT set_config('max_parallel_workers_per_gather', '0', true),
	set_config('enable_sort', 'off', true)`

// rollupCountsSQL is RollupMetrics's read of the counts, summed per bucket.
var rollupCountsSQL = func() string {
	cols, sums := "", ""
	for _, c := range rollupCols {
		cols += ", " + c
		sums += ", sum(" + c + ")::bigint"
	}
	return `SELECT date_bin(make_interval(secs => @secs), r.start, ` + pg.BinOrigin + `), tenant_id, kind, provider, api` + sums + `
FROM ` + rollupRange("rollups", cols) + ` GROUP BY 1, 2, 3, 4, 5`
}()

// RollupMetrics implements recon.MetricsStore from the rollups: one index range scan of hour
// (or minute) rows and one of their money, grouped by bucket.
func (s *Store) RollupMetrics(ctx context.Context, f recon.MetricsFilter) ([]recon.MetricsRow, error) {
	if err := checkRollupFilter(f.Window, f.Bucket); err != nil {
		return nil, err
	}
	args := rollupArgs(f)
	bucket := `date_bin(make_interval(secs => @secs), r.start, ` + pg.BinOrigin + `)`
	out := map[recon.MetricsKey]*recon.MetricsRow{}
	// One snapshot for both reads, so a rollup run committing between them cannot leave
	// money beside counts it replaced.
	tx, err := s.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, pg.Interpret(err, "read rollups")
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, rollupReadSettings); err != nil {
		return nil, pg.Interpret(err, "read rollups")
	}
	// Minute rows are read for the edges outside the level's whole units, or for the whole
	// window when no level fits the bucket.
	if lfrom, lto := args["lfrom"].(time.Time), args["lto"].(time.Time); lfrom.After(f.From) || lto.Before(f.To) {
		need := f.From
		if !lfrom.After(f.From) {
			need = lto
		}
		if err := minutesKept(ctx, tx, need); err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, rollupCountsSQL, args)
	if err != nil {
		return nil, pg.Interpret(err, "read rollups")
	}
	var r recon.MetricsRow
	var kind string
	_, err = pgx.ForEachRow(rows, append([]any{&r.Bucket, &r.TenantID, &kind, &r.Provider, &r.API}, rollupTargets(&r)...), func() error {
		row := r
		row.Bucket, row.Kind, row.Saved, row.Lost = r.Bucket.UTC(), ops.Kind(kind), recon.Money{}, recon.Money{}
		out[row.MetricsKey] = &row
		return nil
	})
	if err != nil {
		return nil, pg.Interpret(err, "read rollups")
	}
	rows, err = tx.Query(ctx, `SELECT `+bucket+`, tenant_id, kind, provider, api, measure, currency, sum(micros)::bigint
FROM `+rollupRange("rollup_money", ", measure, currency, micros")+` GROUP BY 1, 2, 3, 4, 5, 6, 7`, args)
	if err != nil {
		return nil, pg.Interpret(err, "read rollup money")
	}
	var k recon.MetricsKey
	var measure, currency string
	var micros int64
	_, err = pgx.ForEachRow(rows, []any{&k.Bucket, &k.TenantID, &kind, &k.Provider, &k.API, &measure, &currency, &micros}, func() error {
		k.Bucket, k.Kind = k.Bucket.UTC(), ops.Kind(kind)
		row := out[k]
		if row == nil {
			// Money is only ever written beside its counts; a lone money row means the
			// tables disagree, which a page must not hide.
			return fmt.Errorf("money without counts at %s", k.Bucket.Format(time.RFC3339))
		}
		if measure == "saved" {
			row.Saved.Add(currency, micros)
		} else {
			row.Lost.Add(currency, micros)
		}
		return nil
	})
	if err != nil {
		return nil, pg.Interpret(err, "read rollup money")
	}
	return sortedRows(out), nil
}

// BacklogSeries implements recon.BacklogStore: per bucket, the last snapshot taken in it,
// summed over the groups the filter keeps. Buckets of an hour or more read the hourly
// snapshots, so a month is 720 snapshots rather than 43,200.
func (s *Store) BacklogSeries(ctx context.Context, f recon.BacklogFilter) ([]recon.BacklogPoint, error) {
	if err := checkRollupFilter(f.Window, f.Bucket); err != nil {
		return nil, err
	}
	width := 60
	if f.Bucket >= time.Hour {
		width = 3600
	} else if err := minutesKept(ctx, s.db.Pool, f.From); err != nil {
		return nil, err
	}
	rows, err := s.db.Pool.Query(ctx, `
WITH last AS (
	-- Every snapshot writes one marker row; reading the markers alone (a partial index,
	-- 00010) finds each bucket's last snapshot from one index entry per snapshot.
	SELECT date_bin(make_interval(secs => @secs), at, `+pg.BinOrigin+`) AS b, max(at) AS at
	FROM backlog_snapshots
	WHERE width_seconds = @width AND at >= @from AND at < @to
		AND tenant_id = 0 AND kind = '' AND provider = '' AND status = 'unknown'
	GROUP BY 1
)
SELECT l.b, g.taken_at, g.unknown, g.expired, g.oldest_unknown, g.oldest_expired
FROM last l CROSS JOIN LATERAL (
	-- One index probe per bucket: the snapshot's rows, never a scan of the table.
	SELECT max(s.taken_at) AS taken_at,
		coalesce(sum(s.n) FILTER (WHERE s.status = 'unknown' AND k), 0)::bigint AS unknown,
		coalesce(sum(s.n) FILTER (WHERE s.status = 'expired' AND k), 0)::bigint AS expired,
		min(s.oldest_at) FILTER (WHERE s.status = 'unknown' AND k) AS oldest_unknown,
		min(s.oldest_at) FILTER (WHERE s.status = 'expired' AND k) AS oldest_expired
	FROM backlog_snapshots s CROSS JOIN LATERAL (SELECT (@tenant = 0 OR s.tenant_id = @tenant) AND (@kind = '' OR s.kind = @kind) AND (@provider = '' OR s.provider = @provider) AS k) keep
	WHERE s.width_seconds = @width AND s.at = l.at
) g
ORDER BY l.b`, pgx.NamedArgs{"secs": f.Bucket.Seconds(), "width": width, "from": f.From, "to": f.To,
		"tenant": f.TenantID, "kind": string(f.Kind), "provider": f.Provider})
	if err != nil {
		return nil, pg.Interpret(err, "read the backlog snapshots")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.BacklogPoint, error) {
		var p recon.BacklogPoint
		var ou, oe *time.Time
		err := r.Scan(&p.Bucket, &p.TakenAt, &p.Unknown, &p.Expired, &ou, &oe)
		p.Bucket, p.TakenAt = p.Bucket.UTC(), p.TakenAt.UTC()
		if ou != nil {
			p.OldestUnknown = ou.UTC()
		}
		if oe != nil {
			p.OldestExpired = oe.UTC()
		}
		return p, err
	})
	return out, pg.Interpret(err, "read the backlog snapshots")
}
