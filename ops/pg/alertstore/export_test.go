package alertstore

import (
	"context"
	"time"

	"github.com/settle-dev/settle/alerts"
)

// RawCounters is Counters as if the rollup job had never run: every number from the raw rows.
func (s *Store) RawCounters(ctx context.Context, from, to time.Time) ([]alerts.Row, error) {
	out, err := s.counters(ctx, []alerts.Window{{From: from, To: to}}, true)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}
