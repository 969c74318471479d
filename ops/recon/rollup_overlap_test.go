package recon_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// The overlap covers the group commit's deadline and two clocks each off the database's by
// the skew limit: a minute at the default leases, more only for leases long enough to
// allow a wider skew.
func TestRollupOverlapCoversTheCommitBoundAndTwoClocks(t *testing.T) {
	for _, c := range []struct {
		skew, want time.Duration
	}{
		{ops.SkewLimit(30 * time.Second), time.Minute},
		{ops.MinSkewLimit, time.Minute},
		{15 * time.Second, time.Minute},
		{ops.SkewLimit(10 * time.Minute), 150 * time.Second},
		{20*time.Second + time.Millisecond, 71 * time.Second},
	} {
		if got := recon.RollupOverlapFor(c.skew); got != c.want {
			t.Errorf("skew %s: overlap %s, want %s", c.skew, got, c.want)
		}
		if got := recon.RollupOverlapFor(c.skew); got < recon.RollupCommitBound+2*c.skew {
			t.Errorf("skew %s: overlap %s leaves no room for the commit bound", c.skew, got)
		}
	}
	if recon.DefaultRollupOverlap < recon.RollupCommitBound+2*ops.SkewLimit(30*time.Second) {
		t.Fatalf("the default overlap %s is shorter than the commit bound and two default skews", recon.DefaultRollupOverlap)
	}
}
