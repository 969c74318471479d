package ops

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Pass is one pass of a background loop. log is the loop's logger, for what the pass did;
// again asks for the next pass at once, without waiting the interval (work is left).
type Pass func(ctx context.Context, log *slog.Logger) (again bool, err error)

// Loop runs one background service: a pass at once, then one every interval, until its
// context ends. A pass that fails is logged; while the database is unreachable the loop
// logs one line as the outage starts and one as it ends, not one per pass (OutageLog). Build
// it with NewLoop; Run runs it, RunOnce runs one pass as Run would.
type Loop struct {
	name     string
	log      *slog.Logger
	interval time.Duration
	jitter   time.Duration
	pass     Pass
	outages  OutageLog
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

// Jitter adds a random wait of up to d to every interval, so replicas started together do
// not all pass at the same moment.
func (l *Loop) Jitter(d time.Duration) *Loop {
	l.jitter = d
	return l
}

// RunOnce runs one pass and logs how it ended as Run does.
func (l *Loop) RunOnce(ctx context.Context) (again bool, err error) {
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
			if l.jitter > 0 {
				wait += rand.N(l.jitter)
			}
		}
		t.Reset(wait)
	}
}
