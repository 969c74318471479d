package ops

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Sender performs one attempt at a provider with the operation's provider key. It must not
// touch the store: the ledger records the attempt before and after.
type Sender interface {
	Send(ctx context.Context, op *Operation, a *Attempt) AttemptResult
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, op *Operation, a *Attempt) AttemptResult

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, op *Operation, a *Attempt) AttemptResult {
	return f(ctx, op, a)
}

// Sleeper waits between attempts; tests replace it to move a manual clock instead.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext waits for d or until ctx ends.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run sends op through s until the outcome is settled or this call's budget is spent:
// at most Limits.AttemptsPerCall attempts, backoff with jitter between them, never past ctx's
// deadline. first is an attempt already begun (by Open), or nil. When the call's budget
// runs out with the operation still open, the lease is released so the next call or the
// reaper may go on with the same key.
func (l *Ledger) Run(ctx context.Context, op *Operation, first *Attempt, owner string, s Sender, sleep Sleeper) (*Operation, error) {
	if sleep == nil {
		sleep = SleepContext
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	a := first
	for n := 1; ; n++ {
		var err error
		if a == nil {
			if ctx.Err() != nil {
				// The caller's deadline passed: an attempt now could not even be sent.
				return l.release(ctx, op, owner)
			}
			if op, a, err = l.BeginAttempt(ctx, op, owner); err != nil {
				return op, err
			}
		}
		res := s.Send(ctx, op, a)
		var retry bool
		if op, retry, err = l.FinishAttempt(context.WithoutCancel(ctx), op, a, owner, res); err != nil {
			return op, err
		}
		if !retry {
			return op, nil
		}
		wait := Backoff(n, res.RetryAfter, l.Limits, rnd)
		dl, hasDeadline := ctx.Deadline()
		if n >= l.Limits.AttemptsPerCall || (hasDeadline && time.Until(dl) < wait) {
			return l.release(ctx, op, owner)
		}
		if err := sleep(ctx, wait); err != nil {
			return l.release(ctx, op, owner)
		}
		a = nil
	}
}

func (l *Ledger) release(ctx context.Context, op *Operation, owner string) (*Operation, error) {
	out, err := l.Release(context.WithoutCancel(ctx), op, owner, 0, "")
	if err != nil {
		return op, fmt.Errorf("release lease: %w", err)
	}
	return out, nil
}
