package rollupstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

// windowRange is a range of rollup rows and the window, by its index, whose sums it adds to.
type windowRange struct {
	win int
	levelRange
}

// windowRollupsSQL sums the rollup rows of n ranges @w<k>, @f<k>, @t<k> (width in seconds,
// starts from, to) by the window @i<k> each adds to. Each range is its own branch so that
// each is one range scan of the primary key: with the ranges as arrays joined laterally, the
// planner read the whole table. The text depends on n alone, so a pass over the same
// windows prepares it once.
func windowRollupsSQL(n int) string {
	var b strings.Builder
	b.WriteString("SELECT r.win, r.tenant_id, r.kind, r.provider, r.api")
	for _, c := range rollupCols {
		b.WriteString(", sum(r." + c + ")::bigint")
	}
	b.WriteString("\nFROM (\n")
	for k := range n {
		if k > 0 {
			b.WriteString("\tUNION ALL\n")
		}
		fmt.Fprintf(&b, "\tSELECT @i%d::int AS win, * FROM rollups WHERE width_seconds = @w%d AND start >= @f%d AND start < @t%d\n", k, k, k, k)
	}
	b.WriteString(") r\nGROUP BY 1, 2, 3, 4, 5")
	return b.String()
}

// WindowCounts returns the counts of countRaw over w (no money), one row per tenant, kind,
// provider and API with Bucket w.From, read from the rollups where the rollup job has
// settled them and from the raw rows elsewhere (planWindow). w.To is taken for the present:
// the alert evaluator's windows end now. State, rollups and raw rows are read in one
// snapshot, so a pass of the job committing meanwhile cannot count a minute twice or not at
// all.
func (s *Store) WindowCounts(ctx context.Context, w recon.Window) ([]recon.MetricsRow, error) {
	out, err := s.windowCounts(ctx, []recon.Window{w}, false)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// WindowCountsAll is WindowCounts of each of ws, out[i] for ws[i], in one snapshot: the raw
// rows are split at every boundary of the windows' raw ranges and each piece is counted
// once, so the rows after the rollups' cut, which every window ending now reads, are
// counted once for all of them, and the rollup rows of every window are read by one query.
// Each window's rows are what WindowCounts returns for it.
func (s *Store) WindowCountsAll(ctx context.Context, ws []recon.Window) ([][]recon.MetricsRow, error) {
	return s.windowCounts(ctx, ws, false)
}

// RawWindowCounts is WindowCounts from the raw rows alone, whatever the rollup job did: the
// numbers WindowCounts stands in for, for tests that compare the two.
func (s *Store) RawWindowCounts(ctx context.Context, w recon.Window) ([]recon.MetricsRow, error) {
	out, err := s.windowCounts(ctx, []recon.Window{w}, true)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func (s *Store) windowCounts(ctx context.Context, ws []recon.Window, raw bool) ([][]recon.MetricsRow, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	for _, w := range ws {
		if err := checkMetricsFilter(recon.MetricsFilter{Window: w, Bucket: time.Hour}); err != nil {
			return nil, err
		}
	}
	tx, err := s.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, pg.Interpret(err, "count the window")
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := noJIT(ctx, tx); err != nil {
		return nil, err
	}
	st, err := readRollupState(ctx, tx)
	if err != nil {
		return nil, err
	}
	plans := make([]windowPlan, len(ws))
	sums := make([]metricsRows, len(ws))
	var ranges []windowRange
	for i, w := range ws {
		plans[i], sums[i] = planWindow(w, st), metricsRows{}
		if raw {
			plans[i] = windowPlan{raw: []recon.Window{w}}
		}
		for _, r := range plans[i].rollups {
			ranges = append(ranges, windowRange{i, r})
		}
	}
	pace := &pacer{pause: s.pause}
	for _, seg := range rawSegments(plans) {
		rows, err := countRawPaced(ctx, tx, recon.MetricsFilter{Window: seg, Bucket: time.Hour}, pace)
		if err != nil {
			return nil, err
		}
		for i, p := range plans {
			if !p.readsRaw(seg) {
				continue
			}
			for k := range rows {
				r := &rows[k]
				addCounts(sums[i].row(ws[i].From, r.TenantID, string(r.Kind), r.Provider, r.API), r)
			}
		}
	}
	if err := readWindowRollups(ctx, tx, ws, ranges, sums); err != nil {
		return nil, err
	}
	out := make([][]recon.MetricsRow, len(ws))
	for i := range ws {
		out[i] = sortedRows(sums[i])
		for k := range out[i] {
			out[i][k].Saved, out[i][k].Lost = recon.Money{}, recon.Money{}
		}
	}
	return out, nil
}

// rawSegments splits the raw ranges of plans at every boundary any of them has and returns
// the pieces some plan reads, in order: each piece lies wholly inside or wholly outside each
// plan's raw ranges, and no two overlap, so counting each once counts every raw row once.
func rawSegments(plans []windowPlan) []recon.Window {
	var cuts []time.Time
	for _, p := range plans {
		for _, r := range p.raw {
			cuts = append(cuts, r.From, r.To)
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].Before(cuts[j]) })
	var out []recon.Window
	for i := 1; i < len(cuts); i++ {
		seg := recon.Window{From: cuts[i-1], To: cuts[i]}
		if !seg.To.After(seg.From) {
			continue
		}
		for _, p := range plans {
			if p.readsRaw(seg) {
				out = append(out, seg)
				break
			}
		}
	}
	return out
}

// readsRaw reports whether seg lies inside one of p's raw ranges.
func (p windowPlan) readsRaw(seg recon.Window) bool {
	for _, r := range p.raw {
		if !seg.From.Before(r.From) && !seg.To.After(r.To) {
			return true
		}
	}
	return false
}

// readWindowRollups adds the rollup rows of ranges to the sums of their windows, under
// each window's start, in one query.
func readWindowRollups(ctx context.Context, tx pgx.Tx, ws []recon.Window, ranges []windowRange, sums []metricsRows) error {
	if len(ranges) == 0 {
		return nil
	}
	args := pgx.NamedArgs{}
	for k, r := range ranges {
		args[fmt.Sprint("i", k)], args[fmt.Sprint("w", k)] = r.win, int(r.width/time.Second)
		args[fmt.Sprint("f", k)], args[fmt.Sprint("t", k)] = r.from, r.to
	}
	rows, err := tx.Query(ctx, windowRollupsSQL(len(ranges)), args)
	if err != nil {
		return pg.Interpret(err, "read the window's rollups")
	}
	var r recon.MetricsRow
	var win int
	var kind string
	_, err = pgx.ForEachRow(rows, append([]any{&win, &r.TenantID, &kind, &r.Provider, &r.API}, rollupTargets(&r)...), func() error {
		if win < 0 || win >= len(ws) {
			return fmt.Errorf("a rollup row of window %d, of %d", win, len(ws))
		}
		addCounts(sums[win].row(ws[win].From, r.TenantID, kind, r.Provider, r.API), &r)
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
