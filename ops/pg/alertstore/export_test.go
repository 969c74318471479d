package alertstore

import (
	"context"
	"time"

	"github.com/settle-dev/settle/alerts"
)

// RawCounters is Counters as if the rollup job had never run: every number from the raw rows.
func (s *Store) RawCounters(ctx context.Context, from, to time.Time) ([]alerts.Row, error) {
	return s.counters(ctx, from, to, true)
}
