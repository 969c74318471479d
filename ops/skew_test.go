package ops_test

import (
	"context"
	"errors"
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

// slowServer is a database clock in step with this process's whose reply arrives late: the
// server reads its clock at once, and the reply takes delay to come back.
type slowServer struct{ delay time.Duration }

func (s slowServer) ServerNow(context.Context) (time.Time, error) {
	at := time.Now()
	time.Sleep(s.delay)
	return at, nil
}

// On a busy host a reply can take longer than the limit to arrive. A reading is past the
// limit only beyond its own doubt (half its round trip), so a replica in step is not taken
// out of service, nor refused its requests, because the database answered slowly; a clock
// really off is still caught.
func TestASlowReplyIsNotAClockSkew(t *testing.T) {
	limit := 20 * time.Millisecond
	if _, err := ops.CheckSkew(context.Background(), ops.SystemClock{}, slowServer{delay: 5 * limit}, limit); err != nil {
		t.Fatalf("a clock in step, read over a slow round trip: %v", err)
	}
	ahead := ops.NewManualClock(time.Now().Add(time.Minute))
	if _, err := ops.CheckSkew(context.Background(), ahead, slowServer{delay: 5 * limit}, limit); !errors.Is(err, ops.ErrClockSkew) {
		t.Fatalf("a clock a minute ahead: %v, want a clock skew", err)
	}
}
