package web_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/web"
)

// The limiter never lets more than its slots run at once, however many ask.
func TestHashLimiterCapsConcurrency(t *testing.T) {
	t.Parallel()
	l := web.NewHashLimiter(3, 5*time.Second)
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if !l.Acquire(context.Background()) {
				t.Error("a caller was refused although slots free up well within the wait")
				return
			}
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			l.Release()
		})
	}
	wg.Wait()
	if got := most.Load(); got != 3 {
		t.Errorf("at most %d ran at once; want exactly the 3 slots in use at the peak", got)
	}
}

// A caller that finds every slot taken waits at most the limiter's wait (or until its
// request ends) and is then refused, and gets a slot as soon as one is released.
func TestHashLimiterRefusesAfterItsWait(t *testing.T) {
	t.Parallel()
	l := web.NewHashLimiter(2, 30*time.Millisecond)
	ctx := context.Background()
	if !l.Acquire(ctx) || !l.Acquire(ctx) {
		t.Fatal("two slots should be free")
	}
	start := time.Now()
	if l.Acquire(ctx) {
		t.Fatal("a third caller got a slot of two")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
		t.Errorf("refused after %s; want after the 30ms wait", d)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if l.Acquire(cancelled) {
		t.Error("a caller whose request ended got a slot")
	}

	// A wait longer than any scheduling delay, so that the release, not the clock, decides:
	// with the 30 ms wait a busy machine could start the release after the waiter gave up.
	long := web.NewHashLimiter(1, time.Minute)
	if !long.Acquire(ctx) {
		t.Fatal("one slot should be free")
	}
	got := make(chan bool)
	go func() { got <- long.Acquire(ctx) }()
	time.Sleep(5 * time.Millisecond)
	long.Release()
	if !<-got {
		t.Error("a waiting caller did not get the released slot")
	}
}
