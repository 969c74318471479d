package ops

import (
	"context"
	"log/slog"
	"time"
)

// Pass is one pass of a background loop. log is the loop's logger, for what the pass did;
// again asks for the next pass at once, without waiting the interval (work is left).
type Pass func(ctx context.Context, log *slog.Logger) (again bool, err error)

// Loop runs one background service: a pass at once, then one every interval, until its
// context ends. A pass that fails is logged; while the database is unreachable the loop
// logs one line as the outage starts and one as it ends, not one per pass (OutageLog). The
// interval has no jitter: replicas that run the same loop take turns through the rows they
// claim or the lease of a role, not through their timing. Build it with NewLoop; Run runs
// it, RunOnce runs one pass as Run would.
type Loop struct {
	name     string
	log      *slog.Logger
	interval time.Duration
	pass     Pass
	outages  OutageLog
	gate     Gate
}

// NewLoop returns the loop name ("reaper", "outbox relay") that runs pass every interval and
// logs to log.
func NewLoop(log *slog.Logger, name string, interval time.Duration, pass Pass) *Loop {
	if log == nil {
		panic("ops.NewLoop: nil logger for " + name)
	}
	if interval <= 0 {
		panic("ops.NewLoop: no interval for " + name)
	}
	return &Loop{name: name, log: log, interval: interval, pass: pass}
}

// Gated makes every pass wait for g: while g is shut a pass is skipped, and the loop tries
// again after its interval. Serve gates the loops that take leases (rows claimed, roles
// held) with its clock skew guard: a replica whose clock is off the database's would take
// leases that are still live. Work a pass already holds is not cut off: a lease held is
// renewed by the holder's own timer.
func (l *Loop) Gated(g Gate) *Loop {
	l.gate = g
	return l
}

// RunOnce runs one pass and logs how it ended as Run does. A pass its gate holds back does
// nothing and fails nothing: the gate says why, once.
func (l *Loop) RunOnce(ctx context.Context) (again bool, err error) {
	if l.gate != nil && l.gate.Open() != nil {
		return false, nil
	}
	again, err = l.pass(ctx, l.log)
	if ctx.Err() == nil && !l.outages.Pass(l.log, l.name, err) && err != nil {
		l.log.Error("background pass failed", "loop", l.name, "err", err)
	}
	return again, err
}

// Run runs passes until ctx ends. A pass under way when it ends is the pass's to finish or
// cut short; no pass starts after it.
func (l *Loop) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		again, err := l.RunOnce(ctx)
		wait := time.Duration(0)
		if !again || err != nil {
			wait = l.interval
		}
		t.Reset(wait)
	}
}
