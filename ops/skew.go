package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Every lease in the store (an operation's, a job's, a role's) ends at a time written by the
// clock of the process that took it, and is judged run out by the clock of the process that
// reads it. A replica whose clock runs ahead of the others by more than a lease sees every
// live lease as run out and takes it over: the reaper would send again an operation another
// replica is still calling, which rule 11 forbids. The database's clock is the one clock all
// replicas share, so each replica measures its own against it, refuses to start past a
// limit, and takes no new lease while it stays past it.

// ServerClock reads the database server's clock.
type ServerClock interface {
	ServerNow(ctx context.Context) (time.Time, error)
}

// Skew is one measurement of this process's clock against the database's.
type Skew struct {
	// Local is this process's clock and Server the database's, at the same moment.
	Local, Server time.Time
	// Off is Local minus Server: positive when this process runs ahead.
	Off time.Duration
	// RoundTrip is how long the reading took: Off may be wrong by half of it either way.
	RoundTrip time.Duration
}

// Abs is how far the two clocks are apart, either way.
func (s Skew) Abs() time.Duration {
	if s.Off < 0 {
		return -s.Off
	}
	return s.Off
}

// ErrClockSkew is what a check past the limit returns, and why a gate stays shut.
var ErrClockSkew = errors.New("clock skew")

// SkewError says which clocks disagree by how much, in one line.
type SkewError struct {
	Skew  Skew
	Limit time.Duration
}

func (e *SkewError) Error() string {
	return fmt.Sprintf("this process's clock reads %s and the database server's %s: %s apart, past the limit of %s; "+
		"a replica this far off would take over leases that are still live; synchronise this host's clock (NTP)",
		e.Skew.Local.UTC().Format(time.RFC3339Nano), e.Skew.Server.UTC().Format(time.RFC3339Nano), e.Skew.Abs().Round(time.Millisecond), e.Limit)
}

// Unwrap makes a SkewError an ErrClockSkew.
func (e *SkewError) Unwrap() error { return ErrClockSkew }

// MeasureSkew reads the database's clock once and compares it with clock. The server's
// reading is taken to be in the middle of the round trip, which is timed with the monotonic
// clock (clock may be a test's, stopped), so the error of one measurement is at most half
// the round trip.
func MeasureSkew(ctx context.Context, clock Clock, server ServerClock) (Skew, error) {
	// The reading with the shortest round trip is the one least in doubt: a busy host can
	// hold one reply for longer than the limit.
	var best Skew
	for i := range skewReadings {
		sent := time.Now()
		at, err := server.ServerNow(ctx)
		if err != nil {
			return Skew{}, fmt.Errorf("measure the clock skew: %w", err)
		}
		rtt := time.Since(sent)
		local := clock.Now().Add(-rtt / 2)
		if s := (Skew{Local: local, Server: at, Off: local.Sub(at), RoundTrip: rtt}); i == 0 || rtt < best.RoundTrip {
			best = s
		}
	}
	return best, nil
}

// skewReadings is how many readings a measurement takes.
const skewReadings = 3

// MinSkewLimit is the smallest limit SkewLimit returns: one measurement over a busy host's
// round trip can be off by tens of milliseconds, and a clock kept by NTP is within a few.
const MinSkewLimit = 250 * time.Millisecond

// SkewLimit is how far this process's clock may be off the database's: a tenth of the
// shortest of leases. A lease is renewed every third of its length and its work is cut off
// when a third is left, so a tenth leaves that margin whole for delays of the network and
// the database; a skew of a whole lease is what lets a live lease be taken over. Leases of
// zero or less are ignored; never below MinSkewLimit.
func SkewLimit(leases ...time.Duration) time.Duration {
	var least time.Duration
	for _, l := range leases {
		if l > 0 && (least == 0 || l < least) {
			least = l
		}
	}
	return max(least/10, MinSkewLimit)
}

// CheckSkew measures the skew once and returns a *SkewError when it is past limit.
func CheckSkew(ctx context.Context, clock Clock, server ServerClock, limit time.Duration) (Skew, error) {
	s, err := MeasureSkew(ctx, clock, server)
	if err != nil {
		return s, err
	}
	// Past the limit only beyond the reading's own doubt: a slow reply is not a skew.
	if s.Abs()-s.RoundTrip/2 > limit {
		return s, &SkewError{Skew: s, Limit: limit}
	}
	return s, nil
}

// Gate says whether this process may take new leases now: nil when it may.
type Gate interface {
	Open() error
}

// SkewGuard is the gate of a serving replica's lease takers: it keeps the last measured skew
// and is shut while that is past the limit. A replica that cannot read the database's clock
// keeps the last measurement: it cannot take leases then anyway. Build it with NewSkewGuard.
type SkewGuard struct {
	server ServerClock
	clock  Clock
	limit  time.Duration
	log    *slog.Logger

	mu   sync.Mutex
	last Skew
	shut error
}

// NewSkewGuard returns a guard of clock against server's, open until a check finds it past
// limit; log hears when it shuts and opens again.
func NewSkewGuard(server ServerClock, clock Clock, limit time.Duration, log *slog.Logger) *SkewGuard {
	if log == nil {
		panic("ops.NewSkewGuard: nil logger")
	}
	return &SkewGuard{server: server, clock: clock, limit: limit, log: log}
}

// Limit is how far the clocks may be apart before the guard shuts.
func (g *SkewGuard) Limit() time.Duration { return g.limit }

// Check measures the skew, shuts or opens the gate by it, and logs one line when the gate
// changes. It returns the *SkewError while past the limit.
func (g *SkewGuard) Check(ctx context.Context) error {
	s, err := CheckSkew(ctx, g.clock, g.server, g.limit)
	if s.Server.IsZero() {
		return err
	}
	g.mu.Lock()
	was := g.shut
	g.last, g.shut = s, err
	g.mu.Unlock()
	switch {
	case err != nil && was == nil:
		g.log.Error("clock skew: this replica takes no new lease until its clock is back within the limit", "err", err)
	case err == nil && was != nil:
		g.log.Info("clock skew back within the limit: this replica takes leases again",
			"skew", s.Off, "limit", g.limit)
	}
	return err
}

// Open is nil while the last measured skew is within the limit, or none was measured.
func (g *SkewGuard) Open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shut
}

// Last is the last measurement; zero before the first.
func (g *SkewGuard) Last() Skew {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// DefaultSkewInterval is how often a serving replica checks its clock again.
const DefaultSkewInterval = time.Minute

// Loop checks the skew every interval. A skew past the limit is the guard's to log, once,
// not the loop's at every pass.
func (g *SkewGuard) Loop(interval time.Duration) *Loop {
	return NewLoop(g.log, "clock skew check", interval, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		if err := g.Check(ctx); err != nil && !errors.Is(err, ErrClockSkew) {
			return false, err
		}
		return false, nil
	})
}
