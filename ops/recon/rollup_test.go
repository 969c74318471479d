package recon_test

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

func TestMinuteRunsMergesCloseMinutes(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }
	got := recon.MinuteRuns([]time.Time{at(9, 40), at(9, 1), at(9, 0), at(9, 0).Add(30 * time.Second), at(9, 10), at(12, 0)}, 10*time.Minute)
	want := []recon.Window{{From: at(9, 0), To: at(9, 11)}, {From: at(9, 40), To: at(9, 41)}, {From: at(12, 0), To: at(12, 1)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if got := recon.MinuteRuns(nil, time.Minute); len(got) != 0 {
		t.Fatalf("no minutes gave %v", got)
	}
}

// fakeRollups catches up in three passes, and says when it did.
type fakeRollups struct {
	mu     sync.Mutex
	params []recon.RollupParams
	third  chan struct{}
}

func (f *fakeRollups) RunRollups(_ context.Context, p recon.RollupParams) (recon.RollupReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.params = append(f.params, p)
	if len(f.params) == 3 && f.third != nil {
		close(f.third)
	}
	return recon.RollupReport{CaughtUp: len(f.params) >= 3}, nil
}

func (f *fakeRollups) RollupStatus(context.Context) (recon.RollupState, error) {
	return recon.RollupState{}, nil
}

func TestRollupsCatchUpAndDefaults(t *testing.T) {
	store := &fakeRollups{}
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := &recon.Rollups{Store: store, Clock: ops.NewManualClock(now)}
	rep, err := r.CatchUp(context.Background())
	if err != nil || !rep.CaughtUp || len(store.params) != 3 {
		t.Fatalf("catch up: %+v %v after %d passes", rep, err, len(store.params))
	}
	want := recon.RollupParams{Now: now, Overlap: recon.DefaultRollupOverlap, MaxSpan: recon.DefaultRollupMaxSpan, MinuteKeep: recon.DefaultRollupMinuteKeep}
	if store.params[0] != want {
		t.Fatalf("params %+v, want %+v", store.params[0], want)
	}
	// A negative keep keeps every minute.
	store = &fakeRollups{}
	r = &recon.Rollups{Store: store, Clock: ops.NewManualClock(now), MinuteKeep: -1}
	if _, err := r.RunOnce(context.Background()); err != nil || store.params[0].MinuteKeep != 0 {
		t.Fatalf("keep everything: %+v %v", store.params, err)
	}
	// The loop keeps passing without waiting while behind, then stops with its context.
	store = &fakeRollups{third: make(chan struct{})}
	r = &recon.Rollups{Store: store, Clock: ops.NewManualClock(now), Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Loop().Run(ctx); close(done) }()
	select {
	case <-store.third:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop waited between passes while behind")
	}
	cancel()
	<-done
}
