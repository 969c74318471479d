package alerts

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// askingSource is a fakeSource that records how it is asked: the windows of each
// CountersAll call and of each Counters call; failAll makes CountersAll fail.
type askingSource struct {
	fakeSource
	mu      sync.Mutex
	failAll bool
	all     [][]Window
	alone   []Window
}

func (s *askingSource) Counters(ctx context.Context, from, to time.Time) ([]Row, error) {
	s.mu.Lock()
	s.alone = append(s.alone, Window{From: from, To: to})
	s.mu.Unlock()
	return s.fakeSource.Counters(ctx, from, to)
}

func (s *askingSource) CountersAll(ctx context.Context, ws []Window) ([][]Row, error) {
	s.mu.Lock()
	s.all = append(s.all, ws)
	fail := s.failAll
	s.mu.Unlock()
	if fail {
		return nil, errors.New("one window is past the rollups")
	}
	return s.fakeSource.CountersAll(ctx, ws)
}

// A pass over the default rules asks the source once for all the windows its due rules
// read (2m, 5m, 10m, 30m, 1h, 6h, 24h and the 1h an hour back), so that the store can read the rows
// they share once; when that fails, each window is asked for alone, so that a window that
// cannot be read fails its own rules only.
func TestAPassAsksForAllItsWindowsAtOnce(t *testing.T) {
	for _, failAll := range []bool{false, true} {
		src := &askingSource{failAll: failAll}
		now := t0.Add(41 * time.Second)
		ev := &Evaluator{Rules: DefaultRules(), Source: src, Store: newMemStore(), Clock: &manualClock{now: now}}
		if _, err := ev.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(src.all) != 1 {
			t.Fatalf("CountersAll asked %d times, want once", len(src.all))
		}
		seen := map[Window]bool{}
		for _, w := range src.all[0] {
			if seen[w] || !w.To.After(w.From) || w.To.After(now) {
				t.Fatalf("windows %v: %v twice, empty or in the future", src.all[0], w)
			}
			seen[w] = true
		}
		if len(seen) != 8 {
			t.Fatalf("%d windows asked for (%v), want the default rules' 8", len(seen), src.all[0])
		}
		want := 0
		if failAll {
			want = len(seen)
		}
		if len(src.alone) != want {
			t.Fatalf("CountersAll failing %v: %d windows asked for alone (%v), want %d", failAll, len(src.alone), src.alone, want)
		}
	}
}
