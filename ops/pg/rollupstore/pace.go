package rollupstore

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// BackgroundPause is how long the background callers' counts rest between two minutes of
// raw rows (Paced). A pass of the rollup job counts a minute or two of the newest rows and
// the alert evaluator the rows past the rollups' cut: at 300 calls a second a minute is
// some 18,000 calls and 70–140 ms of one core in one statement, and on a small host the
// gateway's calls of that moment wait behind it. Counted a minute at a time with a rest
// between, the same work leaves the cores free for a while after each minute.
const BackgroundPause = 25 * time.Millisecond

// Paced returns a copy of s whose counts of raw rows are cut at every minute and rest pause
// between two minutes (countRawPaced): for background passes, not for a person's page,
// which wants its numbers at once.
func (s *Store) Paced(pause time.Duration) *Store {
	c := *s
	c.pause = max(pause, 0)
	return &c
}

// maxPacedPieces bounds the pieces of one paced count: a window of raw rows longer than that
// many minutes (a day's, while the rollup job is down and every window is counted raw) is
// cut into about that many runs of whole minutes, so that resting between them never costs more
// than a few pauses.
const maxPacedPieces = 8

// pacer spaces the counts of one pass: it rests pause before each but the first (before
// the first too once the pass has run another statement worth a rest, as the rollup pass's
// changed-minutes search is). A zero pause never rests.
type pacer struct {
	pause time.Duration
	begun bool
}

// next waits for the pacer's turn of the next count.
func (p *pacer) next(ctx context.Context) error {
	if p.pause <= 0 {
		return nil
	}
	if !p.begun {
		p.begun = true
		return nil
	}
	if err := rest(ctx, p.pause); err != nil {
		return pg.Interpret(err, "count the raw rows")
	}
	return nil
}

// countRawPaced is countRaw of f's window, cut at every minute (at most maxPacedPieces runs
// of whole minutes) when p has a pause, each piece in its turn of p. Every count is a sum
// over rows placed by one time each (a minute's rollup rows are summed into its quarter hour
// and hour the same way), so the pieces add up to the whole window's counts; with buckets
// wider than a minute a bucket's row may come once per piece, and the caller adds them.
func countRawPaced(ctx context.Context, q querier, f recon.MetricsFilter, p *pacer) ([]recon.MetricsRow, error) {
	if p.pause <= 0 {
		return countRaw(ctx, q, f)
	}
	step := time.Minute
	if span := f.To.Sub(f.From); span > maxPacedPieces*time.Minute {
		step = (span / maxPacedPieces).Truncate(time.Minute) + time.Minute
	}
	var out []recon.MetricsRow
	for from := f.From; from.Before(f.To); {
		piece := f
		piece.Window = recon.Window{From: from, To: minTime(from.Truncate(step).Add(step), f.To)}
		if err := p.next(ctx); err != nil {
			return nil, err
		}
		rows, err := countRaw(ctx, q, piece)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		from = piece.To
	}
	return out, nil
}

// rest waits d, or until ctx ends.
func rest(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
