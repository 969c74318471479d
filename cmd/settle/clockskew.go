package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
)

// skewLimit is how far this process's clock may be off the database's under cfg: a tenth
// of the shortest lease it uses (ops.SkewLimit). It is no setting of its own: it follows
// the leases an operator sets, and a clock kept by NTP is milliseconds off, far within it.
func skewLimit(cfg Config) time.Duration {
	jobLease := cfg.Jobs.Lease
	if jobLease <= 0 {
		jobLease = jobs.DefaultLease
	}
	return ops.SkewLimit(operationLimits(ops.DefaultLimits, cfg.OperationLease).Lease, jobLease, roleLease(cfg))
}

// roleLease is the background roles' lease under cfg.
func roleLease(cfg Config) time.Duration {
	if cfg.RoleLease > 0 {
		return cfg.RoleLease
	}
	return ops.DefaultRoleLease
}

// checkClock refuses to go on, before anything takes a lease, when clock is off the
// database's past cfg's limit: such a process would take over leases that are still live
// (ops rule 11). Serve and the one-off commands that take leases call it right after
// opening the database.
func checkClock(ctx context.Context, cfg Config, clock ops.Clock, db ops.ServerClock) error {
	if _, err := ops.CheckSkew(ctx, clock, db, skewLimit(cfg)); err != nil {
		return fmt.Errorf("check the clock: %w", err)
	}
	return nil
}

// startSkewGuard checks the clock again every ops.DefaultSkewInterval while serving: past
// the limit, the guard shuts the loops that take leases (goLoop, the job workers, the alert
// evaluator), readiness answers 503, and settle_clock_skew_seconds on reg (when not nil)
// shows the skew. The guard's own loop is not gated: it is what opens it again.
func (p *Program) startSkewGuard(ctx context.Context, reg *prometheus.Registry) {
	p.skew = newSkewGuard(p.Config, p.DB, p.Clock, p.Logger)
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "settle_clock_skew_seconds",
			Help: "This replica's clock minus the database server's at the last check (positive: ahead). " +
				"Past a tenth of the shortest lease the replica takes no new lease and is not ready."},
			func() float64 { return p.skew.Last().Off.Seconds() }))
	}
	loop := p.skew.Loop(ops.DefaultSkewInterval)
	p.goService(func() { loop.Run(ctx) })
}

// newSkewGuard is the guard of clock against db's under cfg's limit, open until a check
// finds it past the limit. Serve and the stdio MCP server each run one in a loop.
func newSkewGuard(cfg Config, db ops.ServerClock, clock ops.Clock, logger *slog.Logger) *ops.SkewGuard {
	return ops.NewSkewGuard(db, clock, skewLimit(cfg), logger)
}

// gate is the gate of this program's lease takers; nil before the guard is built.
func (p *Program) gate() ops.Gate {
	if p.skew == nil {
		return nil
	}
	return p.skew
}

// gated is l held back by the clock skew guard, once there is one: a loop that takes
// leases, rows claimed or a role held, passes while the clock is off the database's.
func (p *Program) gated(l *ops.Loop) *ops.Loop {
	if g := p.gate(); g != nil {
		l.Gated(g)
	}
	return l
}
