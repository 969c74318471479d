package web

import (
	"context"
	"time"
)

// HashLimiter caps how many password checks run at once. A bcrypt comparison is meant to
// cost tens of milliseconds of one CPU, so a flood of sign-ins would otherwise take every
// CPU from the API; beyond the cap a sign-in waits briefly, then is refused with 503.
type HashLimiter struct {
	slots chan struct{}
	wait  time.Duration
}

// NewHashLimiter returns a limiter of n slots (at least one) whose callers wait at most
// wait for a free one.
func NewHashLimiter(n int, wait time.Duration) *HashLimiter {
	return &HashLimiter{slots: make(chan struct{}, max(n, 1)), wait: wait}
}

// Acquire takes a slot, waiting at most the limiter's wait. It reports false, holding
// nothing, when no slot freed in time or ctx ended first; the caller answers "busy" then,
// so waiting callers never pile up for longer than the wait.
func (l *HashLimiter) Acquire(ctx context.Context) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// Release frees a slot taken by Acquire.
func (l *HashLimiter) Release() { <-l.slots }
