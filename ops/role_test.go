package ops_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// memLeases keeps leases in memory, with the rules of the leases table.
type memLeases struct {
	mu     sync.Mutex
	leases map[string]ops.Lease
	// renewFails, when set, is what every renewal answers.
	renewFails error
	// onRenew, when set, hears of every renewal asked for, with the lock held.
	onRenew func(l ops.Lease, until time.Time)
}

func newMemLeases() *memLeases { return &memLeases{leases: map[string]ops.Lease{}} }

func (m *memLeases) TakeLease(_ context.Context, name, owner string, now, until time.Time) (ops.Lease, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[name]
	switch {
	case l.Owner == owner && l.Until.After(now):
	case l.Owner == "" || !l.Until.After(now):
		l.Token++
	default:
		return l, false, nil
	}
	l.Name, l.Owner, l.Until = name, owner, until
	m.leases[name] = l
	return l, true, nil
}

func (m *memLeases) RenewLease(_ context.Context, l ops.Lease, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.onRenew != nil {
		m.onRenew(l, until)
	}
	if m.renewFails != nil {
		return false, m.renewFails
	}
	cur := m.leases[l.Name]
	if cur.Owner != l.Owner || cur.Token != l.Token || cur.Until.IsZero() {
		return false, nil
	}
	cur.Until = until
	m.leases[l.Name] = cur
	return true, nil
}

func (m *memLeases) ReleaseLease(_ context.Context, l ops.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.leases[l.Name]; cur.Owner == l.Owner && cur.Token == l.Token {
		cur.Until = time.Time{}
		m.leases[l.Name] = cur
	}
	return nil
}

// takeOver hands name to another holder, as a replica does once the lease ran out.
func (m *memLeases) takeOver(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[name]
	l.Owner, l.Token, l.Until = "thief", l.Token+1, time.Now().Add(time.Hour)
	m.leases[name] = l
}

var quiet = slog.New(slog.DiscardHandler)

// A role runs on one holder at a time: while one holds it another's Hold does nothing and
// names the holder; a role held per run is free again once the run ends; a kept role stays
// with its holder between runs, until it is released or runs out.
func TestRoleRunsOnOneHolderAtATime(t *testing.T) {
	ctx := context.Background()
	clock := ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	leases := newMemLeases()
	a := ops.NewRole(leases, clock, quiet, "rollups", "rollups:a", 30*time.Second)
	b := ops.NewRole(leases, clock, quiet, "rollups", "rollups:b", 30*time.Second)
	var inner ops.Lease
	var innerHeld bool
	first, held, err := a.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		inner, innerHeld, _ = b.Hold(ctx, func(context.Context, ops.Lease) error {
			t.Error("b ran while a held the role")
			return nil
		})
		return nil
	})
	if err != nil || !held || innerHeld || inner.Owner != first.Owner || inner.Token != first.Token {
		t.Fatalf("a held %v (%v) as %+v; b saw %+v, held %v", held, err, first, inner, innerHeld)
	}
	if _, held, err := b.Hold(ctx, func(context.Context, ops.Lease) error { return nil }); err != nil || !held {
		t.Fatalf("b after a's run ended: held %v (%v), want the role free", held, err)
	}

	// Kept: a stays the holder between two Holds, with one token.
	leader := ops.NewRole(leases, clock, quiet, "alerts", "alerts:a", 30*time.Second).Kept()
	other := ops.NewRole(leases, clock, quiet, "alerts", "alerts:b", 30*time.Second).Kept()
	one, held, _ := leader.Hold(ctx, func(context.Context, ops.Lease) error { return nil })
	clock.Advance(10 * time.Second)
	two, held2, _ := leader.Hold(ctx, func(context.Context, ops.Lease) error { return nil })
	if !held || !held2 || one.Token != two.Token || one.Owner != two.Owner || !strings.HasPrefix(one.Owner, "alerts:a#") {
		t.Fatalf("kept role: %+v then %+v, want one holding by alerts:a", one, two)
	}
	if h, held, _ := other.Hold(ctx, func(context.Context, ops.Lease) error { return nil }); held || h.Owner != one.Owner {
		t.Fatalf("another replica took a kept role its holder renews: %+v", h)
	}
	// Its holder stops renewing: another takes it over once the lease ran out, with the next
	// token.
	clock.Advance(31 * time.Second)
	if l, held, _ := other.Hold(ctx, func(context.Context, ops.Lease) error { return nil }); !held || l.Token != one.Token+1 {
		t.Fatalf("takeover after the lease ran out: %+v held %v, want token %d", l, held, one.Token+1)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := leader.Hold(ctx, func(context.Context, ops.Lease) error { return nil }); !held {
		t.Fatal("a released kept role was not free at once")
	}
}

// The holder renews its lease every third of it while the work runs; when the lease is lost
// (taken over), or cannot be renewed before a third of it is left, the work's context ends
// and Hold says the lease was lost: past that point another replica may be doing the same
// work.
func TestRoleCutsItsWorkOffWhenTheLeaseIsLost(t *testing.T) {
	ctx := context.Background()
	leases := newMemLeases()
	role := ops.NewRole(leases, ops.SystemClock{}, quiet, "retention", "retention:a", 300*time.Millisecond)
	var renewed atomic.Bool
	_, held, err := role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		// Several renewals keep it held past its first lease.
		time.Sleep(500 * time.Millisecond)
		renewed.Store(ctx.Err() == nil)
		return nil
	})
	if err != nil || !held || !renewed.Load() {
		t.Fatalf("a long run: held %v, err %v, still held after its first lease %v", held, err, renewed.Load())
	}
	_, _, err = role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		leases.takeOver("retention")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("not cut off")
		}
	})
	if !errors.Is(err, ops.ErrLeaseLost) {
		t.Fatalf("work whose lease was taken over ended with %v, want the lease lost", err)
	}

	// Renewals that fail: the role's clock moves on a third of the lease at each, as the
	// ticker does, so when the work is cut off is read on the role's clock, not from how soon
	// a loaded machine ran the renewals.
	const lease = 300 * time.Millisecond
	clock := ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	var renewedAt []time.Time
	leases.mu.Lock()
	leases.leases = map[string]ops.Lease{}
	leases.renewFails = ops.DatabaseUnreachable(errors.New("connection refused"))
	leases.onRenew = func(_ ops.Lease, until time.Time) {
		renewedAt = append(renewedAt, until.Add(-lease))
		clock.Advance(lease / 3)
	}
	leases.mu.Unlock()
	unrenewed := ops.NewRole(leases, clock, quiet, "retention", "retention:b", lease)
	taken, _, err := unrenewed.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		<-ctx.Done()
		return ctx.Err()
	})
	// Cut off at the renewal that found a third of the lease left: the third one, before the
	// lease ran out, and not at the two before it.
	if !errors.Is(err, ops.ErrLeaseLost) || len(renewedAt) != 3 || !renewedAt[2].Add(lease/3).Equal(taken.Until) {
		t.Fatalf("work that could not renew ended with %v after renewals at %v, want the lease lost at the third, a third of the lease before its end %v",
			err, renewedAt, taken.Until)
	}
}

// A loop passes at once, again at once while its pass asks to, then every interval, and no
// pass starts once its context ended.
func TestLoopPassesUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var passes atomic.Int32
	done := make(chan struct{})
	loop := ops.NewLoop(quiet, "test", time.Hour, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		if passes.Add(1) == 3 {
			cancel()
		}
		return true, nil
	})
	go func() {
		loop.Run(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop waited an interval while its pass asked for another at once, or did not stop")
	}
	if n := passes.Load(); n != 3 {
		t.Fatalf("%d passes, want 3: none after the context ended", n)
	}
}

// A loop and a role are given their logger when they are built: neither falls back to the
// process's global logger, so a service wired without one fails at start, not in silence.
func TestLoopAndRoleRefuseANilLogger(t *testing.T) {
	for name, build := range map[string]func(){
		"loop": func() { ops.NewLoop(nil, "test", time.Second, nil) },
		"role": func() { ops.NewRole(newMemLeases(), ops.SystemClock{}, nil, "test", "test:a", time.Second) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a %s built with a nil logger", name)
				}
			}()
			build()
		}()
	}
}
