package ops

import (
	"context"
	"sync"
	"time"
)

// ReportPhase records that the attempt being sent under ctx reached phase p (sent to the
// provider, first token). Senders call it; outside a Run it does nothing.
func ReportPhase(ctx context.Context, p Phase) {
	if t, ok := ctx.Value(trackerKey{}).(*tracker); ok {
		t.phase(p)
	}
}

type trackerKey struct{}

func withTracker(ctx context.Context, t *tracker) context.Context {
	return context.WithValue(ctx, trackerKey{}, t)
}

// tracker records the phases of one attempt and keeps its lease alive while a long send
// runs. It writes from timers, so a sender streaming to its client never waits for the
// database and a short attempt starts no goroutine; it owns the operation's version until
// stop hands it back. A phase is written once it has lasted the delay: an attempt that ends
// sooner records no intermediate phase, and of two phases reached within the delay only the
// later is written.
type tracker struct {
	l     *Ledger
	ctx   context.Context
	delay time.Duration
	every time.Duration
	owner string

	writing sync.Mutex // held by a write, so writes land in order and stop waits for one

	mu           sync.Mutex
	op           *Operation
	cur, pending Phase
	flush, renew *time.Timer
	stopped      bool
}

var phaseRank = map[Phase]int{PhaseSending: 1, PhaseSentToProvider: 2, PhaseFirstToken: 3}

func (l *Ledger) track(ctx context.Context, op *Operation, owner string, delay time.Duration) *tracker {
	t := &tracker{l: l, ctx: ctx, owner: owner, delay: max(delay, 0), every: l.Limits.Lease / 3, op: op, cur: PhaseSending}
	if t.every <= 0 {
		t.every = 10 * time.Second
	}
	t.renew = time.AfterFunc(t.every, t.renewLease)
	return t
}

// phase asks for the phase to move forward; each phase is written once.
func (t *tracker) phase(p Phase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || phaseRank[p] <= phaseRank[t.cur] || phaseRank[p] <= phaseRank[t.pending] {
		return
	}
	t.pending = p
	if t.flush == nil {
		t.flush = time.AfterFunc(t.delay, t.flushPhase)
	}
}

// flushPhase writes the phase that has lasted the delay.
func (t *tracker) flushPhase() {
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	p, stopped := t.pending, t.stopped
	t.pending, t.flush = PhaseNone, nil
	t.mu.Unlock()
	if !stopped && p != PhaseNone {
		t.write(p, false)
	}
}

// renewLease extends the lease, writing a pending phase with it, and comes back later.
func (t *tracker) renewLease() {
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	p := t.cur
	if t.pending != PhaseNone {
		p, t.pending = t.pending, PhaseNone
		if t.flush != nil {
			t.flush.Stop()
			t.flush = nil
		}
	}
	t.mu.Unlock()
	t.write(p, true)
	t.mu.Lock()
	if !t.stopped {
		t.renew.Reset(t.every)
	}
	t.mu.Unlock()
}

// write moves the phase in one guarded write, extending the lease when renew asks or when
// less than half of it is left; the caller holds t.writing. Progress is not a decision: no
// new version, no audit row. A phase written with the lease left alone changes no indexed
// column, which keeps the write off every index of operations; the renewal timer, not the
// phases, is what keeps the lease from running out while the send goes on.
func (t *tracker) write(p Phase, renew bool) {
	t.mu.Lock()
	op := t.op
	t.mu.Unlock()
	now := t.l.Clock.Now()
	var until time.Time
	if renew || op.LeaseUntil == nil || op.LeaseUntil.Sub(now) < t.l.Limits.Lease/2 {
		until = now.Add(t.l.Limits.Lease)
	}
	out, err := t.l.store.SetPhase(t.ctx, op.ID, t.owner, p, until, now)
	if err != nil {
		t.l.logger().Warn("record phase", "operation", op.ID, "phase", p, "err", err)
		return
	}
	t.mu.Lock()
	t.op, t.cur = out, p
	t.mu.Unlock()
}

// stop ends the tracking, waits for a write under way, and returns the operation as last
// written.
func (t *tracker) stop() *Operation {
	t.mu.Lock()
	t.stopped = true
	if t.flush != nil {
		t.flush.Stop()
	}
	t.renew.Stop()
	t.mu.Unlock()
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.op
}
