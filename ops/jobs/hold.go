package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
)

// holdJob extends the job's lease every third of it until the returned stop is called, so
// a long generation does not look like a dead worker.
func (r *run) holdJob(ctx context.Context) (stop func()) {
	lease := r.w.Ledger.Limits.Lease
	quit, done := make(chan struct{}), make(chan struct{})
	id := r.j.ID
	go func() {
		defer close(done)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				now := r.now()
				err := r.w.Store.ExtendJob(ctx, id, r.owner, now, now.Add(lease))
				if ops.ErrorCode(err) == ops.ECONFLICT {
					// Published, parked, or taken over: nothing left to hold.
					return
				}
				if err != nil {
					// The database did not answer: the next tick tries again, within the
					// lease, so a blink does not hand a live worker's job to another.
					r.w.logger().Warn("renew the job's lease", "job", id, "worker", r.owner, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}
