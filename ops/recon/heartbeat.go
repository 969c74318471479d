package recon

import (
	"context"
	"time"
)

// LeaseRenewer is a Store that can extend a lease while its holder still holds it. With it,
// a run's lease can be short and renewed, so a replica that dies mid-run stops holding the
// reconciler up soon after.
type LeaseRenewer interface {
	// RenewLease moves the end of owner's lease to until; held is false when the lease is
	// no longer owner's (released, or taken over after it ran out).
	RenewLease(ctx context.Context, name, owner string, until time.Time) (held bool, err error)
}

// heartbeat is the Store's renewer and the lease's length when the run renews its lease;
// zero when it holds it for LeaseFor instead.
func (r *Reconciler) heartbeat() (LeaseRenewer, time.Duration) {
	lr, ok := r.Store.(LeaseRenewer)
	if !ok || r.Heartbeat <= 0 {
		return nil, 0
	}
	return lr, r.Heartbeat
}

// keepLease renews the run's lease every third of heartbeat until the returned stop is
// called. When the lease is no longer the run's, or could not be renewed before it runs out,
// it cuts the run off through lost: past that point another replica may be reconciling.
func (r *Reconciler) keepLease(ctx context.Context, lost context.CancelFunc, lr LeaseRenewer, name, owner string,
	heartbeat time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(heartbeat / 3)
		defer t.Stop()
		held := r.Ledger.Clock.Now().Add(heartbeat)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := r.Ledger.Clock.Now()
			ok, err := lr.RenewLease(ctx, name, owner, now.Add(heartbeat))
			switch {
			case err == nil && ok:
				held = now.Add(heartbeat)
			case err == nil:
				r.logger().Warn("reconciler lease lost; run cut off", "lease", name, "owner", owner)
				lost()
				return
			case ctx.Err() == nil && !now.Add(heartbeat/3).Before(held):
				r.logger().Warn("reconciler lease not renewed before it runs out; run cut off", "lease", name, "err", err)
				lost()
				return
			default:
				r.logger().Warn("renew the reconciler lease", "lease", name, "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
