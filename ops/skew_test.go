package ops_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// The skew limit follows the shortest lease in use, a tenth of it, so that a skew within it
// leaves the third of a lease its holder keeps as margin nearly whole; it never goes below
// what one measurement over a busy host can be off by.
func TestSkewLimitIsATenthOfTheShortestLease(t *testing.T) {
	for _, c := range []struct {
		leases []time.Duration
		want   time.Duration
	}{
		{[]time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second}, 3 * time.Second},
		{[]time.Duration{10 * time.Minute, 5 * time.Second, 0}, 500 * time.Millisecond},
		{[]time.Duration{time.Second}, ops.MinSkewLimit},
		{nil, ops.MinSkewLimit},
	} {
		if got := ops.SkewLimit(c.leases...); got != c.want {
			t.Errorf("SkewLimit(%v) = %s, want %s", c.leases, got, c.want)
		}
	}
}
