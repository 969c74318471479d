package ops

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Reaper looks after operations nobody is looking after: it expires open operations past
// the provider's key retention, and takes over in-progress ones whose lease ran out. A
// stalled operation is sent again with the same key while the key is retained and its own
// policy allows a resend of an uncertain attempt; otherwise its outcome is unknown.
type Reaper struct {
	Ledger   *Ledger
	Owner    string
	Interval time.Duration
	// Senders resend stalled operations, by kind. An operation of a kind without one whose
	// policy allows a resend is released for its client's retry or its job's worker to go on
	// with the same key; otherwise it is marked unknown. The reaper asks no provider what an
	// attempt did, so it never resends itself an operation of a provider that takes no key
	// once any of its attempts may have been executed: that is released too, for a sender
	// that looks it up first.
	Senders map[Kind]Sender
	// ClientWait is how long after it opened an operation released for its client's retry
	// waits for that client: a client that has not come back by then is gone, and the
	// operation, which its last attempt may have run, is marked unknown for the reconciler's
	// lookup and a person instead of being released again at every pass until its key
	// expires. Default DefaultClientWait; a job's operation, which its worker goes on
	// with, is always released.
	ClientWait time.Duration
	Sleep      Sleeper
	Logger     *slog.Logger
	Batch      int
}

// DefaultClientWait is a Reaper's ClientWait when none is set: the LLM gateway's default
// deadline of one client request.
const DefaultClientWait = 10 * time.Minute

// Reaped counts what one pass did.
type Reaped struct {
	Expired, Resent, Released, Unknown int
}

// Loop is the reaper's background loop: a pass every Interval. Every replica runs one: each
// stalled operation is claimed in its own row.
func (r *Reaper) Loop() *Loop {
	return NewLoop(r.Logger, "reaper", r.Interval, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		_, err := r.RunOnce(ctx)
		return false, err
	})
}

// RunOnce does one pass and reports what it did.
func (r *Reaper) RunOnce(ctx context.Context) (Reaped, error) {
	var out Reaped
	n, err := r.Ledger.ExpireDue(ctx, r.Owner)
	out.Expired += n
	if err != nil {
		return out, fmt.Errorf("expire: %w", err)
	}
	l := r.Ledger
	now := l.Clock.Now()
	batch := r.Batch
	if batch <= 0 {
		batch = 100
	}
	stalled, err := l.store.ClaimStalled(ctx, r.Owner, now, now.Add(l.Limits.Lease), batch)
	if err != nil {
		return out, fmt.Errorf("claim stalled: %w", err)
	}
	for _, op := range stalled {
		if ctx.Err() != nil {
			// Stopping: the claims left run out with their leases, and a later pass, here or
			// in another process, takes them over.
			break
		}
		next, _ := NextStatus(op, OutcomeTimeout, op.Policy, now, l.Limits)
		s := r.Senders[op.Kind]
		if s != nil && next == StatusInProgress {
			if s, err = r.sender(ctx, op, s); err != nil {
				return out, err
			}
		}
		switch {
		case next == StatusInProgress && s != nil:
			if _, err := l.Run(context.WithoutCancel(ctx), op, s, r.resendSpec(ctx)); err != nil {
				return out, fmt.Errorf("resend %s: %w", op.ID, err)
			}
			out.Resent++
		case next == StatusInProgress && r.clientGone(op, now):
			if _, err := l.markUnknown(ctx, op, r.Owner, "lease ran out and the client did not come back"); err != nil {
				return out, fmt.Errorf("mark %s unknown: %w", op.ID, err)
			}
			out.Unknown++
		case next == StatusInProgress:
			if _, err := l.release(ctx, op, r.Owner, 0, ""); err != nil {
				return out, fmt.Errorf("release %s: %w", op.ID, err)
			}
			out.Released++
		case next == StatusExpired:
			if _, err := l.expire(ctx, op, r.Owner, r.Owner, "lease ran out past the provider's key retention"); err != nil {
				return out, fmt.Errorf("expire %s: %w", op.ID, err)
			}
			out.Expired++
		default:
			if _, err := l.markUnknown(ctx, op, r.Owner, "lease ran out without a result"); err != nil {
				return out, fmt.Errorf("mark %s unknown: %w", op.ID, err)
			}
			out.Unknown++
		}
	}
	return out, nil
}

// clientGone reports whether op, released for its client's retry, has waited for that
// client past ClientWait since it opened.
func (r *Reaper) clientGone(op *Operation, now time.Time) bool {
	if r.Ledger.Kind(op.Kind).Jobs {
		return false
	}
	wait := r.ClientWait
	if wait <= 0 {
		wait = DefaultClientWait
	}
	return now.Sub(op.CreatedAt) > wait
}

// resendSpec is how a pass resends a stalled operation. The send in hand is not cut when
// ctx ends: cut short, a send the provider may have run is recorded as uncertain. Stopping
// waits for its answer and records it; only then does the run end, releasing the lease
// instead of sending again or waiting out a backoff.
func (r *Reaper) resendSpec(ctx context.Context) RunSpec {
	sleep := r.Sleep
	if sleep == nil {
		sleep = SleepContext
	}
	return RunSpec{Owner: r.Owner,
		Sleep: func(_ context.Context, d time.Duration) error { return sleep(ctx, d) },
		Hooks: Hooks{MayRetry: func() bool { return ctx.Err() == nil }}}
}
