package rollupstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// RollupStaleAfter is how long after the rollup job's last pass its rows still stand in for
// the raw rows of a window: four passes. Past it the job is taken for down (its replica
// gone, its lease lost) and WindowCounts counts every raw row, as if it had never run.
const RollupStaleAfter = 4 * recon.DefaultRollupInterval

// levelRange is a range of rollup rows of one width: starts in [from, to).
type levelRange struct {
	width    time.Duration
	from, to time.Time
}

// windowPlan is how WindowCounts reads a window: the rollup rows of the settled part, and
// the raw rows of the rest.
type windowPlan struct {
	rollups []levelRange
	raw     []recon.Window
}

// planWindow splits w at the cut, the last whole minute the rollup job had computed as of
// its last pass (st.MinutesUntil, truncated to the minute): the whole minutes before it read
// their rollup rows, in hours and quarter hours where whole ones fit, and the rest (the
// partial minute at the window's start, the minutes after the cut, and minute rows pruned
// before st.MinutesFrom) read the raw rows. The rollups hold what countRaw returned for
// those minutes as of the job's last pass, and every change since it the job's next pass
// counts, so the sums are the raw counts up to the job's own lag. When the job never ran or
// its last pass is older than RollupStaleAfter before w.To, everything is raw.
func planWindow(w recon.Window, st recon.RollupState) windowPlan {
	all := windowPlan{raw: []recon.Window{w}}
	if !st.Ran() || w.To.Sub(st.LastRunAt) > RollupStaleAfter {
		return all
	}
	lo := ceilTo(w.From, time.Minute)
	cut := st.MinutesUntil.Truncate(time.Minute)
	if end := w.To.Truncate(time.Minute); end.Before(cut) {
		cut = end
	}
	if !cut.After(lo) {
		return all
	}
	var p windowPlan
	minutes := []levelRange{{time.Minute, lo, cut}}
	if q1, q2 := ceilTo(lo, 15*time.Minute), cut.Truncate(15*time.Minute); q1.Before(q2) {
		minutes = []levelRange{{time.Minute, lo, q1}, {time.Minute, q2, cut}}
		if h1, h2 := ceilTo(q1, time.Hour), q2.Truncate(time.Hour); h1.Before(h2) {
			p.rollups = append(p.rollups, levelRange{15 * time.Minute, q1, h1}, levelRange{time.Hour, h1, h2},
				levelRange{15 * time.Minute, h2, q2})
		} else {
			p.rollups = append(p.rollups, levelRange{15 * time.Minute, q1, q2})
		}
	}
	p.raw = append(p.raw, recon.Window{From: w.From, To: lo})
	for _, m := range minutes {
		// Minute rows before MinutesFrom are pruned; the levels above are kept, but these
		// minutes are not a whole unit of them, so they are counted raw.
		if kept := st.MinutesFrom; !kept.IsZero() && m.from.Before(kept) {
			pruned := recon.Window{From: m.from, To: minTime(m.to, kept)}
			p.raw = append(p.raw, pruned)
			m.from = pruned.To
		}
		p.rollups = append(p.rollups, m)
	}
	p.raw = append(p.raw, recon.Window{From: cut, To: w.To})
	p.raw = joinWindows(p.raw)
	kept := p.rollups[:0]
	for _, r := range p.rollups {
		if r.to.After(r.from) {
			kept = append(kept, r)
		}
	}
	p.rollups = kept
	return p
}

// joinWindows drops the empty windows of ws, in order, and joins those that touch.
func joinWindows(ws []recon.Window) []recon.Window {
	var out []recon.Window
	for _, w := range ws {
		switch {
		case !w.To.After(w.From):
		case len(out) > 0 && out[len(out)-1].To.Equal(w.From):
			out[len(out)-1].To = w.To
		default:
			out = append(out, w)
		}
	}
	return out
}

func ceilTo(t time.Time, d time.Duration) time.Time {
	if c := t.Truncate(d); c.Before(t) {
		return c.Add(d)
	}
	return t
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// maxLevelRanges is the most ranges planWindow reads: minutes, quarter hours, hours,
// quarter hours, minutes.
const maxLevelRanges = 5

// windowRollupsSQL sums the rollup rows of the ranges @w<i>, @f<i>, @t<i> (width in
// seconds, starts from, to), each its own branch so that each is one range scan of the
// primary key: with the ranges as arrays joined laterally, the planner read the whole table.
var windowRollupsSQL = func() string {
	sums, branches := "", ""
	for _, c := range rollupCols {
		sums += ", sum(r." + c + ")::bigint"
	}
	for i := range maxLevelRanges {
		if i > 0 {
			branches += "\n\tUNION ALL\n"
		}
		branches += fmt.Sprintf("\tSELECT * FROM rollups WHERE width_seconds = @w%d AND start >= @f%d AND start < @t%d", i, i, i)
	}
	return `SELECT r.tenant_id, r.kind, r.provider, r.api` + sums + `
FROM (
` + branches + `
) r
GROUP BY 1, 2, 3, 4`
}()

// WindowCounts returns the counts of countRaw over w (no money), one row per tenant, kind,
// provider and API with Bucket w.From, read from the rollups where the rollup job has
// settled them and from the raw rows elsewhere (planWindow). w.To is taken for the present:
// the alert evaluator's windows end now. State, rollups and raw rows are read in one
// snapshot, so a pass of the job committing meanwhile cannot count a minute twice or not at
// all.
func (s *Store) WindowCounts(ctx context.Context, w recon.Window) ([]recon.MetricsRow, error) {
	return s.windowCounts(ctx, w, false)
}

// RawWindowCounts is WindowCounts from the raw rows alone, whatever the rollup job did: the
// numbers WindowCounts stands in for, for tests that compare the two.
func (s *Store) RawWindowCounts(ctx context.Context, w recon.Window) ([]recon.MetricsRow, error) {
	return s.windowCounts(ctx, w, true)
}

func (s *Store) windowCounts(ctx context.Context, w recon.Window, raw bool) ([]recon.MetricsRow, error) {
	if err := checkMetricsFilter(recon.MetricsFilter{Window: w, Bucket: time.Hour}); err != nil {
		return nil, err
	}
	tx, err := s.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, pg.Interpret(err, "count the window")
	}
	defer func() { _ = tx.Rollback(ctx) }()
	st, err := readRollupState(ctx, tx)
	if err != nil {
		return nil, err
	}
	p := planWindow(w, st)
	if raw {
		p = windowPlan{raw: []recon.Window{w}}
	}
	sums := metricsRows{}
	for _, raw := range p.raw {
		rows, err := countRaw(ctx, tx, recon.MetricsFilter{Window: raw, Bucket: time.Hour})
		if err != nil {
			return nil, err
		}
		for i := range rows {
			r := &rows[i]
			addCounts(sums.row(w.From, r.TenantID, string(r.Kind), r.Provider, r.API), r)
		}
	}
	if len(p.rollups) > 0 {
		if err := readWindowRollups(ctx, tx, w.From, p.rollups, sums); err != nil {
			return nil, err
		}
	}
	out := sortedRows(sums)
	for i := range out {
		out[i].Saved, out[i].Lost = recon.Money{}, recon.Money{}
	}
	return out, nil
}

// readWindowRollups adds the rollup rows of ranges to sums, under bucket.
func readWindowRollups(ctx context.Context, tx pgx.Tx, bucket time.Time, ranges []levelRange, sums metricsRows) error {
	if len(ranges) > maxLevelRanges {
		return fmt.Errorf("read the window's rollups: %d ranges, at most %d", len(ranges), maxLevelRanges)
	}
	args := pgx.NamedArgs{}
	for i := range maxLevelRanges {
		r := levelRange{width: time.Minute, from: bucket, to: bucket} // empty
		if i < len(ranges) {
			r = ranges[i]
		}
		args[fmt.Sprint("w", i)], args[fmt.Sprint("f", i)], args[fmt.Sprint("t", i)] = int(r.width/time.Second), r.from, r.to
	}
	rows, err := tx.Query(ctx, windowRollupsSQL, args)
	if err != nil {
		return pg.Interpret(err, "read the window's rollups")
	}
	var r recon.MetricsRow
	var kind string
	_, err = pgx.ForEachRow(rows, append([]any{&r.TenantID, &kind, &r.Provider, &r.API}, rollupTargets(&r)...), func() error {
		addCounts(sums.row(bucket, r.TenantID, kind, r.Provider, r.API), &r)
		return nil
	})
	return pg.Interpret(err, "read the window's rollups")
}

// addCounts adds src's counts (not its money) to dst.
func addCounts(dst, src *recon.MetricsRow) {
	to, from := rollupTargets(dst), rollupValues(src)
	for i, v := range from {
		*to[i].(*int64) += v.(int64)
	}
}
