package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
)

// goLoop runs a background service's loop until ctx ends; Close waits for it.
func (p *Program) goLoop(ctx context.Context, l *ops.Loop) {
	p.goService(func() { p.gated(l).Run(ctx) })
}

// role is the role name of this replica, as who ("rollups") names it in the lease's owner
// ("<who>:<worker id>"), with a lease of SETTLE_ROLE_LEASE.
func (p *Program) role(name, who string) *ops.Role {
	return ops.NewRole(p.DB, p.Clock, p.Logger, name, ops.NewOwner(who, p.Config.WorkerID), p.Config.RoleLease)
}

// alertsRole is the name of the alert evaluator's role.
const alertsRole = "alerts"

// startEvaluator runs ev's passes, every ev.Interval, while this replica holds the
// evaluator's role, which it keeps from one pass to the next: its schedule of due groups is
// its own, and forgotten while another replica evaluates, so a replica that takes over
// evaluates every group at once. Stopping gives the role up, so another replica takes over
// at once.
func (p *Program) startEvaluator(ctx context.Context, ev *alerts.Evaluator) {
	role := ops.NewRole(p.DB, p.Clock, p.Logger, alertsRole, ops.NewOwner("alerts", p.Config.WorkerID), ev.LeaseFor()).Kept()
	loop := p.gated(ops.NewLoop(p.Logger, "alert evaluator", ev.Interval(), func(ctx context.Context, log *slog.Logger) (bool, error) {
		_, held, err := role.Hold(ctx, func(ctx context.Context, _ ops.Lease) error {
			res, err := ev.RunOnce(ctx)
			if err == nil && res.Errors > 0 {
				log.Warn("alert rules failed to evaluate", "rules", res.Errors)
			}
			return err
		})
		if err == nil && !held {
			ev.Forget()
		}
		return false, err
	}))
	p.goService(func() {
		loop.Run(ctx)
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := role.Release(release); err != nil {
			p.Logger.Warn("give up the alert evaluator's role", "err", err)
		}
	})
}
