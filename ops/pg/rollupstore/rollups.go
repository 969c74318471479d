package rollupstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// rollupStateName names the job's row in rollup_state.
const rollupStateName = "rollups"

// coarseLevels are the rollup levels above the minute, each a sum of its minute rows: the
// quarter hour serves the insights page's 24 hours (96 points), the hour everything wider.
// Both divide an hour and a day, so their rows never straddle a bucket a page reads.
var coarseLevels = []time.Duration{15 * time.Minute, time.Hour}

// changedRunGap is how far apart two changed minutes may be and still be recomputed by one
// query (with the minutes between them).
const changedRunGap = 30 * time.Minute

// rollupCols are the counters of a rollup row, in the order rollupValues writes them.
var rollupCols = []string{"client_requests", "duplicates", "replays", "answered_in_progress", "answered_conflict",
	"answered_checking", "answered_rejected", "answered_cancel", "operations", "succeeded", "failed", "unknown", "expired", "attempts",
	"attempts_sent", "timeouts", "charges", "orphans", "double_charges", "refused_budget",
	"refused_too_small"}

func rollupValues(r *recon.MetricsRow) []any {
	return []any{r.ClientRequests, r.Duplicates, r.Replays, r.InProgress, r.Conflicts, r.Checking, r.Rejected, r.Cancels,
		r.Operations, r.Succeeded, r.Failed, r.Unknown, r.Expired, r.Attempts, r.AttemptsSent, r.Timeouts,
		r.Charges, r.Orphans, r.DoubleCharges, r.BudgetRefused, r.BudgetTooSmall}
}

func rollupTargets(r *recon.MetricsRow) []any {
	return []any{&r.ClientRequests, &r.Duplicates, &r.Replays, &r.InProgress, &r.Conflicts, &r.Checking, &r.Rejected, &r.Cancels,
		&r.Operations, &r.Succeeded, &r.Failed, &r.Unknown, &r.Expired, &r.Attempts, &r.AttemptsSent, &r.Timeouts,
		&r.Charges, &r.Orphans, &r.DoubleCharges, &r.BudgetRefused, &r.BudgetTooSmall}
}

// RollupStatus implements recon.RollupStore.
func (s *Store) RollupStatus(ctx context.Context) (recon.RollupState, error) {
	return readRollupState(ctx, s.db.Pool)
}

func readRollupState(ctx context.Context, q rowQuerier) (recon.RollupState, error) {
	var st recon.RollupState
	var minutesFrom *time.Time
	err := q.QueryRow(ctx, `SELECT minutes_until, changes_until, last_run_at, minutes_from FROM rollup_state WHERE name = $1`, rollupStateName).
		Scan(&st.MinutesUntil, &st.ChangesUntil, &st.LastRunAt, &minutesFrom)
	if errors.Is(err, pgx.ErrNoRows) {
		return recon.RollupState{}, nil
	}
	if err != nil {
		return st, pg.Interpret(err, "read the rollup state")
	}
	st.MinutesUntil, st.ChangesUntil, st.LastRunAt = st.MinutesUntil.UTC(), st.ChangesUntil.UTC(), st.LastRunAt.UTC()
	if minutesFrom != nil {
		st.MinutesFrom = minutesFrom.UTC()
	}
	return st, nil
}

// RunRollups implements recon.RollupStore, in one transaction that holds the row of the job's
// lease in share mode: readers see a minute's old rows or its new ones, never none; a run
// whose lease was lost skips its turn; nobody takes the lease over, and no retention batch
// removes rows (RemoveBatch), until the transaction ends.
func (s *Store) RunRollups(ctx context.Context, p recon.RollupParams) (recon.RollupReport, error) {
	var rep recon.RollupReport
	now := p.Now.UTC()
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return rep, pg.Interpret(err, "begin the rollup")
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pg.LockLeaseRow(ctx, tx, recon.RollupRole, false); err != nil {
		return rep, pg.Interpret(err, "lock the rollup")
	}
	held, err := pg.HoldLease(ctx, tx, p.Lease, now)
	if err != nil {
		return rep, pg.Interpret(err, "check the rollup's lease")
	}
	if !held {
		rep.Skipped = true
		return rep, nil
	}
	// The changed-minutes search and the coarse sums are estimated from the same CTEs and
	// minutes as the counts: none of the pass is compiled (noJITSQL).
	if err := noJIT(ctx, tx); err != nil {
		return rep, err
	}
	st, err := readRollupState(ctx, tx)
	if err != nil {
		return rep, err
	}
	fresh, until, err := newMinutes(ctx, tx, st, p, now, &rep)
	if err != nil {
		return rep, err
	}
	windows := []recon.Window{fresh}
	if st.Ran() {
		changed, err := changedMinutes(ctx, tx, st, p, fresh.From, &rep)
		if err != nil {
			return rep, err
		}
		windows = append(windows, changed...)
	}

	// A paced store (a background pass) rests after the search and between two minutes
	// counted, so that the pass never holds a core for long (Paced).
	pace := &pacer{pause: s.pause, begun: st.Ran()}
	for _, w := range windows {
		n, err := rollupWindow(ctx, tx, w, now, pace)
		if err != nil {
			return rep, err
		}
		rep.Rows += n
		rep.Minutes += int(w.To.Sub(w.From) / time.Minute)
	}
	minutesFrom := st.MinutesFrom
	if rep.CaughtUp {
		if minutesFrom, err = snapshotAndPrune(ctx, tx, p, now, minutesFrom, &rep); err != nil {
			return rep, err
		}
	}
	if err := saveRollupState(ctx, tx, rep, until, now, minutesFrom); err != nil {
		return rep, err
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, pg.Interpret(err, "commit the rollup")
	}
	return rep, nil
}

// newMinutes returns the window of minutes this run computes for the first time, and how
// far the state may then say the minutes are done; it sets the report's range and whether
// the run caught up with now.
func newMinutes(ctx context.Context, tx pgx.Tx, st recon.RollupState, p recon.RollupParams, now time.Time, rep *recon.RollupReport) (recon.Window, time.Time, error) {
	// The range computed for the first time (or again, within the overlap) starts where the
	// last run ended; the very first run starts at the oldest recorded row.
	base := st.MinutesUntil
	from := base.Add(-p.Overlap)
	if !st.Ran() {
		var earliest *time.Time
		err := tx.QueryRow(ctx, `SELECT least(
	(SELECT min(created_at) FROM operations), (SELECT min(received_at) FROM client_requests),
	(SELECT min(started_at) FROM attempts), (SELECT min(charged_at) FROM provider_charges WHERE operation_id IS NULL))`).Scan(&earliest)
		if err != nil {
			return recon.Window{}, time.Time{}, pg.Interpret(err, "find the oldest row")
		}
		base = now
		if earliest != nil && earliest.Before(now) {
			base = *earliest
		}
		from = base
	}
	from = from.UTC().Truncate(time.Minute)
	until, end := now, now.Truncate(time.Minute).Add(time.Minute)
	rep.CaughtUp = true
	if limit := base.Add(p.MaxSpan).Truncate(time.Minute); p.MaxSpan > 0 && limit.Before(now) {
		until, end, rep.CaughtUp = limit, limit, false
	}
	if from.After(end) {
		from = end.Add(-time.Minute)
	}
	rep.From, rep.To = from, end
	return recon.Window{From: from, To: end}, until, nil
}

// changedMinutesSQL finds the minutes before @from whose rows changed since @since.
// Of a changed operation it reads the times the rollups count it by (its creation, its
// attempts' starts, its client requests' receipts) only if it was created before @before,
// and each of those only from @lead before its creation: a client request or an attempt is
// stamped, by its writer's clock just before its statement, after the operation exists, so
// no earlier than its creation as the creator's clock stamped it less the overlap's bound (a
// statement's wait for its commit and two clocks' skew; ops/recon.DefaultRollupOverlap). An
// operation created at @from plus the overlap or later then has no counted time before @from:
// its minutes are all in the pass's fresh window. At a steady rate every call of the last
// minute has changed (opened, its attempt finished, its charge recorded), and without the
// bound each was joined to its attempts and client requests (in every monthly partition)
// for nothing. A charge counts in its operation's minute (an orphan in its own), so a
// charge recorded since makes its operation a changed one.
//
// Nearly every changed operation was created since @since (the calls of the interval and
// the overlap), so those are read once, id and creation time, by one range of
// operations_created_idx (recent), which also yields the ones created before @before. Only
// a changed id not among them (an older operation with late activity: a retry, a late
// close, a late charge; few at a steady rate) is looked up by id (late). Looking every
// changed id up probed operations_pkey and fetched the wide row of every recent call: a
// pass at 300 calls a second looked up 19,476 ids to keep 698. The ids not recent are
// found by grouping both lists together rather than by an anti-join: on statistics older
// than the rows the planner takes the range for empty and may scan one list again for each
// row of the other; a grouping is linear whatever it expects.
//
// The attempts and client requests of the operations looked up by id are probed by id
// (looked). Those of an operation created since @since are stamped no earlier than @since
// less @lead, so the rows that can count before @from are read by one range of times,
// [@since - @lead, @from), and matched to their operations by a window over the id, linear
// for the same reason as the grouping. Up to a minute of calls is created between @since
// and @before, and probing each one's attempts and client requests by id cost most of a
// pass (24,608 probes, 104,647 shared buffers, where the range
// reads 8,979 in all; TestChangedMinutesLookUpOnlyOperationsOlderThanTheChanges).
var changedMinutesSQL = `
WITH recent AS MATERIALIZED (
	SELECT o.id, o.created_at FROM operations o WHERE o.created_at >= @since
), late AS (
	SELECT u.id FROM (
		SELECT r.id, true AS recent FROM recent r
		UNION ALL SELECT a.entity_id::uuid, false FROM audit_log a WHERE a.at >= @since AND a.entity = 'operation'
		UNION ALL SELECT a.operation_id, false FROM attempts a
			WHERE a.started_at >= @since::timestamptz - @finish_window::interval AND a.finished_at >= @since AND a.audit_id IS NOT NULL
		UNION ALL SELECT pc.operation_id, false FROM provider_charges pc WHERE pc.seen_at >= @since AND pc.operation_id IS NOT NULL
	) u GROUP BY u.id HAVING NOT bool_or(u.recent)
), looked AS (
	SELECT o.id, o.created_at FROM late l JOIN operations o ON o.id = l.id AND o.created_at < @before
), old AS (
	SELECT r.id, r.created_at FROM recent r WHERE r.created_at < @before
	UNION ALL SELECT o.id, o.created_at FROM looked o
), times AS (
	SELECT o.created_at AS at FROM old o
	UNION ALL SELECT a.started_at FROM looked o JOIN attempts a ON a.operation_id = o.id
		AND a.started_at >= o.created_at - @lead::interval AND a.started_at < @from
	UNION ALL SELECT cr.received_at FROM looked o JOIN client_requests cr ON cr.operation_id = o.id
		AND cr.received_at >= o.created_at - @lead::interval AND cr.received_at < @from
	UNION ALL SELECT s.at FROM (
		SELECT s.at, max(s.created_at) OVER (PARTITION BY s.id) AS created_at FROM (
			SELECT o.id, o.created_at, NULL::timestamptz AS at FROM old o
			UNION ALL SELECT a.operation_id, NULL, a.started_at FROM attempts a
				WHERE a.started_at >= @since::timestamptz - @lead::interval AND a.started_at < @from
			UNION ALL SELECT cr.operation_id, NULL, cr.received_at FROM client_requests cr
				WHERE cr.received_at >= @since::timestamptz - @lead::interval AND cr.received_at < @from
		) s
	) s WHERE s.at >= s.created_at - @lead::interval
	UNION ALL SELECT pc.charged_at FROM provider_charges pc WHERE pc.seen_at >= @since AND pc.operation_id IS NULL
	UNION ALL SELECT o.created_at FROM recon_exceptions e JOIN operations o ON o.id = e.operation_id
		WHERE e.kind = 'double_charge' AND e.last_seen_at >= @since
)
SELECT DISTINCT date_bin('1 minute', at, ` + pg.BinOrigin + `) FROM times WHERE at < @from`

// changedMinutesArgs are changedMinutesSQL's arguments for a pass whose fresh window starts
// at from, after a run that left st.
func changedMinutesArgs(st recon.RollupState, p recon.RollupParams, from time.Time) pgx.NamedArgs {
	return pgx.NamedArgs{"since": st.ChangesUntil.Add(-p.Overlap), "from": from, "before": from.Add(p.Overlap),
		"lead": p.Overlap, "finish_window": pg.FinishAuditWindow + time.Second}
}

// changedMinutes returns, as windows to recompute, the older minutes (before from) whose
// rows changed since the last run: an operation was opened (its creation) or closed or went
// unknown (every status change is audited: an audit row, or the finish of the attempt that
// changed it, within pg.FinishAuditWindow of its start, and a second for the rounding of
// stored times), a charge was recorded, or a double charge was found (an LLM operation's
// double generation counts as one).
func changedMinutes(ctx context.Context, tx pgx.Tx, st recon.RollupState, p recon.RollupParams, from time.Time, rep *recon.RollupReport) ([]recon.Window, error) {
	rows, err := tx.Query(ctx, changedMinutesSQL, changedMinutesArgs(st, p, from))
	if err != nil {
		return nil, pg.Interpret(err, "find changed minutes")
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, pg.Interpret(err, "find changed minutes")
	}
	rep.Changed = len(changed)
	var windows []recon.Window
	horizon, err := retentionHorizon(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, w := range recon.MinuteRuns(changed, changedRunGap) {
		if !w.To.After(horizon) {
			continue
		}
		if w.From.Before(horizon) {
			w.From = horizon
		}
		if !st.MinutesFrom.IsZero() && w.From.Truncate(time.Hour).Before(st.MinutesFrom) {
			// Its hour's other minutes may be pruned: recompute the whole hours from
			// the raw rows, so the quarter hours and hours summed from them stay exact.
			w.From, w.To = w.From.Truncate(time.Hour), w.To.Add(-time.Nanosecond).Truncate(time.Hour).Add(time.Hour)
		}
		if w.To.After(from) {
			w.To = from
		}
		windows = append(windows, w)
	}
	return windows, nil
}

// snapshotAndPrune runs when the rollups have caught up with now: it snapshots the backlog
// and prunes the minute rows older than p.MinuteKeep. It returns where the kept minute rows
// start.
func snapshotAndPrune(ctx context.Context, tx pgx.Tx, p recon.RollupParams, now, minutesFrom time.Time, rep *recon.RollupReport) (time.Time, error) {
	var err error
	if rep.Snapshot, err = snapshotBacklog(ctx, tx, now); err != nil {
		return minutesFrom, err
	}
	// Pruning waits for the present: while catching up, an hour's levels are summed
	// from minutes the next pass still needs.
	if h := now.Add(-p.MinuteKeep).Truncate(time.Hour); p.MinuteKeep > 0 && h.After(minutesFrom) {
		if minutesFrom, err = nextPruneStep(ctx, tx, minutesFrom, h); err != nil {
			return minutesFrom, err
		}
		if rep.Pruned, err = pruneMinutes(ctx, tx, minutesFrom); err != nil {
			return minutesFrom, err
		}
	}
	return minutesFrom, nil
}

// saveRollupState records the run: how far the minutes are done (until), when changes were
// last looked for (now), the report, and where the kept minute rows start.
func saveRollupState(ctx context.Context, tx pgx.Tx, rep recon.RollupReport, until, now, minutesFrom time.Time) error {
	var keptFrom *time.Time
	if !minutesFrom.IsZero() {
		keptFrom = &minutesFrom
	}
	report, _ := json.Marshal(rep)
	if _, err := tx.Exec(ctx, `
INSERT INTO rollup_state (name, minutes_until, changes_until, last_run_at, last_report, minutes_from) VALUES ($1, $2, $3, $3, $4, $5)
ON CONFLICT (name) DO UPDATE SET minutes_until = excluded.minutes_until, changes_until = excluded.changes_until,
	last_run_at = excluded.last_run_at, last_report = excluded.last_report, minutes_from = excluded.minutes_from`,
		rollupStateName, until, now, report, keptFrom); err != nil {
		return pg.Interpret(err, "record the rollup state")
	}
	return nil
}

// rollupWindow recomputes the minutes of w from the raw rows, replaces their rollup rows,
// and recomputes the quarter hours and hours holding them from their minute rows, counting
// in the turns of pace (countRawPaced). It returns the minute rows written.
func rollupWindow(ctx context.Context, tx pgx.Tx, w recon.Window, now time.Time, pace *pacer) (int, error) {
	rows, err := countRawPaced(ctx, tx, recon.MetricsFilter{Window: w, Bucket: time.Minute}, pace)
	if err != nil {
		return 0, fmt.Errorf("count %s..%s: %w", w.From.Format(time.RFC3339), w.To.Format(time.RFC3339), err)
	}
	args := pgx.NamedArgs{"from": w.From, "to": w.To, "now": now}
	for _, table := range []string{"rollups", "rollup_money"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE width_seconds = 60 AND start >= @from AND start < @to`, args); err != nil {
			return 0, pg.Interpret(err, "clear minute rollups")
		}
	}
	var vals, money [][]any
	for i := range rows {
		r := &rows[i]
		key := []any{60, r.Bucket, r.TenantID, string(r.Kind), r.Provider, r.API}
		vals = append(vals, append(append(append([]any{}, key...), rollupValues(r)...), now))
		for measure, m := range map[string]recon.Money{"saved": r.Saved, "lost": r.Lost} {
			for cur, v := range m {
				if v != 0 {
					money = append(money, append(append([]any{}, key...), measure, cur, v))
				}
			}
		}
	}
	keyCols := []string{"width_seconds", "start", "tenant_id", "kind", "provider", "api"}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"rollups"}, append(append(append([]string{}, keyCols...), rollupCols...), "computed_at"),
		pgx.CopyFromRows(vals)); err != nil {
		return 0, pg.Interpret(err, "write minute rollups")
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"rollup_money"}, append(append([]string{}, keyCols...), "measure", "currency", "micros"),
		pgx.CopyFromRows(money)); err != nil {
		return 0, pg.Interpret(err, "write minute money")
	}
	sums := ""
	for _, c := range rollupCols {
		sums += ", sum(" + c + ")"
	}
	cols := ""
	for _, c := range rollupCols {
		cols += ", " + c
	}
	// Both coarser levels are summed from the minute rows, not one from the other, so each
	// is exact on its own whatever state the other is in.
	for _, lv := range coarseLevels {
		width := int(lv / time.Second)
		args["lwidth"], args["lfrom"] = width, w.From.Truncate(lv)
		args["lto"] = w.To.Add(-time.Nanosecond).Truncate(lv).Add(lv)
		start := fmt.Sprintf(`date_bin('%d seconds', start, `+pg.BinOrigin+`)`, width)
		for _, sql := range []string{
			`DELETE FROM rollups WHERE width_seconds = @lwidth AND start >= @lfrom AND start < @lto`,
			`DELETE FROM rollup_money WHERE width_seconds = @lwidth AND start >= @lfrom AND start < @lto`,
			`INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, api` + cols + `, computed_at)
SELECT @lwidth, ` + start + `, tenant_id, kind, provider, api` + sums + `, @now
FROM rollups WHERE width_seconds = 60 AND start >= @lfrom AND start < @lto
GROUP BY 2, 3, 4, 5, 6`,
			`INSERT INTO rollup_money (width_seconds, start, tenant_id, kind, provider, api, measure, currency, micros)
SELECT @lwidth, ` + start + `, tenant_id, kind, provider, api, measure, currency, sum(micros)
FROM rollup_money WHERE width_seconds = 60 AND start >= @lfrom AND start < @lto
GROUP BY 2, 3, 4, 5, 6, 7, 8`,
		} {
			if _, err := tx.Exec(ctx, sql, args); err != nil {
				return 0, pg.Interpret(err, fmt.Sprintf("recompute %s rollups", lv))
			}
		}
	}
	return len(vals), nil
}

// pruneSpan bounds the minutes one pass prunes, so the first prune of a long history (an
// upgrade, a shorter keep) is many short deletes, a pass every few seconds, rather than
// one transaction holding the job's lock for minutes.
const pruneSpan = 24 * time.Hour

// nextPruneStep returns how far this pass prunes towards h: a day past the last step, or,
// the first time, past the oldest minute row.
func nextPruneStep(ctx context.Context, tx pgx.Tx, last, h time.Time) (time.Time, error) {
	from := last
	if from.IsZero() {
		var oldest *time.Time
		if err := tx.QueryRow(ctx, `SELECT least((SELECT min(start) FROM rollups WHERE width_seconds = 60),
	(SELECT min(at) FROM backlog_snapshots WHERE width_seconds = 60))`).Scan(&oldest); err != nil {
			return last, pg.Interpret(err, "find the oldest minute rollup")
		}
		if oldest == nil {
			return h, nil
		}
		from = oldest.UTC().Truncate(time.Hour)
	}
	if step := from.Add(pruneSpan); step.Before(h) {
		return step, nil
	}
	return h, nil
}

// pruneMinutes deletes the minute rollups, their money and the minute backlog snapshots
// before h, and returns how many rows went. The levels above the minute stay: every page
// reading further back than a day reads quarter hours, hours or hourly snapshots.
func pruneMinutes(ctx context.Context, tx pgx.Tx, h time.Time) (int, error) {
	n := 0
	for _, sql := range []string{
		`DELETE FROM rollups WHERE width_seconds = 60 AND start < $1`,
		`DELETE FROM rollup_money WHERE width_seconds = 60 AND start < $1`,
		`DELETE FROM backlog_snapshots WHERE width_seconds = 60 AND at < $1`,
	} {
		tag, err := tx.Exec(ctx, sql, h)
		if err != nil {
			return n, pg.Interpret(err, "prune minute rollups")
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// snapshotBacklog records the unknown and expired backlog now, as the minute's snapshot and
// as the hour's latest. Counts come from queue_counts (kept by a trigger) and each group's
// oldest from one probe of operations_open_age_idx.
func snapshotBacklog(ctx context.Context, tx pgx.Tx, now time.Time) (int, error) {
	args := pgx.NamedArgs{"now": now, "minute": now.Truncate(time.Minute), "hour": now.Truncate(time.Hour)}
	if _, err := tx.Exec(ctx, `
DELETE FROM backlog_snapshots WHERE (width_seconds = 60 AND at = @minute) OR (width_seconds = 3600 AND at = @hour)`, args); err != nil {
		return 0, pg.Interpret(err, "clear the backlog snapshot")
	}
	tag, err := tx.Exec(ctx, `
WITH g AS (
	SELECT q.status, q.tenant_id, q.kind, q.provider, sum(q.n) AS n,
		(SELECT o.created_at FROM operations o
		 WHERE o.status = q.status AND o.tenant_id = q.tenant_id AND o.kind = q.kind AND o.provider = q.provider
		 ORDER BY o.created_at LIMIT 1) AS oldest
	FROM queue_counts q WHERE q.status IN ('unknown', 'expired')
	GROUP BY 1, 2, 3, 4 HAVING sum(q.n) > 0
	UNION ALL
	SELECT 'unknown', 0, '', '', 0, NULL
)
INSERT INTO backlog_snapshots (width_seconds, at, tenant_id, kind, provider, status, n, oldest_at, taken_at)
SELECT w.width, CASE w.width WHEN 60 THEN @minute::timestamptz ELSE @hour::timestamptz END, g.tenant_id, g.kind, g.provider, g.status, g.n, g.oldest, @now
FROM g CROSS JOIN (VALUES (60), (3600)) w(width)`, args)
	if err != nil {
		return 0, pg.Interpret(err, "snapshot the backlog")
	}
	return int(tag.RowsAffected())/2 - 1, nil // less the marker row
}
