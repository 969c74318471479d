package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Some background work must be done by one replica at a time: the reconciler of a provider,
// the alert evaluator, the rollup job, the body purge, the retention. Each is a Role, held
// through a named lease in one table of the store: taken in one statement, renewed by its
// holder every third of its length while the work runs, released when it ends. A replica
// killed mid-work, or cut off from the database, stops renewing and loses the lease once it
// runs out; another replica takes it over then. Every other background service runs on every
// replica, because each item of its work is claimed in its own row (the reaper, the outbox
// relays, the bulk lookups, the job workers) or doing it twice changes nothing (the session
// sweep).

// Lease is one holding of a named role.
type Lease struct {
	Name  string
	Owner string
	// Token is the fencing counter: it grows by one whenever another holding begins, so a
	// write matched on the token of a holding that was lost changes nothing.
	Token int64
	// Until is when the lease runs out unless renewed; zero once it was released.
	Until time.Time
}

// Held reports whether l is held at now.
func (l Lease) Held(now time.Time) bool { return l.Owner != "" && l.Until.After(now) }

// LeaseStore keeps the leases: every method is one statement, so two replicas asking at
// once never both win.
type LeaseStore interface {
	// TakeLease takes the lease name for owner until until when nobody holds it at now
	// (never taken, released, or run out), with a new token, or renews it when owner holds
	// it already. held false returns the lease as its holder has it.
	TakeLease(ctx context.Context, name, owner string, now, until time.Time) (l Lease, held bool, err error)
	// RenewLease moves the end of l to until while l's owner still holds it with l's token;
	// held is false when the lease was lost (taken over after it ran out, or released).
	RenewLease(ctx context.Context, l Lease, until time.Time) (held bool, err error)
	// ReleaseLease gives l up, when it is still held with its token.
	ReleaseLease(ctx context.Context, l Lease) error
}

// DefaultRoleLease is a role's lease when none is given: a replica that dies holding it
// holds the work up for at most that long.
const DefaultRoleLease = 30 * time.Second

// Role is one piece of background work that runs on one replica at a time, through the
// lease of its name. Build it with NewRole.
type Role struct {
	name, owner string
	leases      LeaseStore
	clock       Clock
	lease       time.Duration
	log         *slog.Logger
	// kept: the lease stays with its holder between two Holds (a leader), instead of being
	// released after each.
	kept bool
}

// NewRole returns the role name of this process, which owner names ("<role>:<worker id>"):
// a Hold takes the lease for lease at a time, renews it every third of it, and releases it
// when done, so that any replica, or a one-off command, may run the next one. log hears
// about leases lost or not renewed in time.
func NewRole(leases LeaseStore, clock Clock, log *slog.Logger, name, owner string, lease time.Duration) *Role {
	if log == nil {
		panic("ops.NewRole: nil logger")
	}
	if lease <= 0 {
		lease = DefaultRoleLease
	}
	return &Role{name: name, owner: owner, leases: leases, clock: clock, lease: lease, log: log}
}

// Kept makes r a leader: its holder keeps the lease between two Holds and renews it at each,
// so the work stays on one replica until that replica stops (call Release then) or dies.
// Holds must then come at least every third of the lease. The holder is r's owner with a
// mark of its own ("alerts:<worker id>#<mark>"): two replicas given one worker id are still
// two holders, never one that both renew.
func (r *Role) Kept() *Role {
	if !r.kept {
		r.owner = NewOwner(r.owner, "")
	}
	r.kept = true
	return r
}

// Hold runs fn while this process holds the role, and returns the lease as it was taken.
// When another holds it, fn does not run and held is false, with the holder's lease. fn's
// context ends when the lease is lost, or could not be renewed before a third of it was
// left: past that point another replica may be doing the same work. Statements that must
// not outlive the holding are matched on the lease's token.
func (r *Role) Hold(ctx context.Context, fn func(ctx context.Context, l Lease) error) (l Lease, held bool, err error) {
	owner := r.owner
	if !r.kept {
		// A token per holding, so two holdings in one process exclude each other as two
		// replicas do, and the owner never renews the lease of a holding it no longer has.
		owner = NewOwner(owner, "")
	}
	now := r.clock.Now()
	l, held, err = r.leases.TakeLease(ctx, r.name, owner, now, now.Add(r.lease))
	if err != nil {
		return l, false, fmt.Errorf("take the %s lease: %w", r.name, err)
	}
	if !held {
		return l, false, nil
	}
	runCtx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	stop := r.keep(runCtx, cut, l)
	err = fn(runCtx, l)
	stop()
	if cause := context.Cause(runCtx); errors.Is(cause, ErrLeaseLost) && (err == nil || errors.Is(err, context.Canceled)) {
		err = cause
	}
	if !r.kept {
		if rerr := r.leases.ReleaseLease(context.WithoutCancel(ctx), l); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release the %s lease: %w", r.name, rerr))
		}
	}
	return l, true, err
}

// Release gives up a kept role's lease, if this process holds it, so that another replica
// takes it over at once instead of after the lease runs out.
func (r *Role) Release(ctx context.Context) error {
	now := r.clock.Now()
	// Taking it again renews it when it is ours; nobody else's is touched.
	l, held, err := r.leases.TakeLease(ctx, r.name, r.owner, now, now.Add(r.lease))
	if err != nil || !held {
		return err
	}
	return r.leases.ReleaseLease(ctx, l)
}

// ErrLeaseLost is why a Hold's context ended, and what it returns, when the lease was lost
// while its work ran.
var ErrLeaseLost = errors.New("lease lost")

// keep renews l every third of the lease until the returned stop is called. When the lease
// is lost, or could not be renewed before only a third of it is left, it cuts the holding's
// context off.
func (r *Role) keep(ctx context.Context, cut context.CancelCauseFunc, l Lease) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(r.lease / 3)
		defer t.Stop()
		held := l.Until
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := r.clock.Now()
			ok, err := r.leases.RenewLease(ctx, l, now.Add(r.lease))
			switch {
			case err == nil && ok:
				held = now.Add(r.lease)
			case err == nil:
				r.log.Warn("role lease lost; its work cut off", "role", r.name, "owner", l.Owner)
				cut(fmt.Errorf("the %s %w", r.name, ErrLeaseLost))
				return
			case ctx.Err() == nil && !now.Add(r.lease/3).Before(held):
				r.log.Warn("role lease not renewed before it runs out; its work cut off", "role", r.name, "err", err)
				cut(fmt.Errorf("the %s %w: not renewed in time: %w", r.name, ErrLeaseLost, err))
				return
			case ctx.Err() == nil && !Unreachable(err):
				r.log.Warn("renew the role lease", "role", r.name, "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
