package jobs

import (
	"context"
	"time"
)

// sweep queues again the jobs a worker of an earlier release left unknown after their
// operation's close (Store.RequeueStranded), at most once every SweepEvery: only while
// replicas of two releases run side by side can one be left so, and an idle worker is the
// one with time for it. A failure is logged and tried again at the next sweep.
func (w *Worker) sweep(ctx context.Context, now time.Time) {
	every := w.SweepEvery
	if every <= 0 {
		every = time.Minute
	}
	last := w.lastSweep.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < every || !w.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	n, err := w.Store.RequeueStranded(ctx, now)
	if err != nil {
		w.logger().Warn("requeue stranded jobs", "worker", w.Owner, "err", err)
		return
	}
	if n > 0 {
		w.logger().Info("queued jobs left unknown beside a closed operation", "worker", w.Owner, "jobs", n)
	}
}
