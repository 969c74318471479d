package main

import (
	"context"

	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// startRollups runs the rollup job of serve and demo: it keeps the per-minute rollups that
// the reconciliation and insights pages read, and the backlog snapshots, and prunes minute
// rows older than SETTLE_ROLLUP_MINUTES_KEEP. Every replica may
// run it; its role lets one act at a time, and each pass replaces whole minutes, so a pass
// repeated after a takeover changes nothing.
func (p *Program) startRollups(ctx context.Context) {
	// The overlap covers the clocks' skew the leases allow: a minute at the default leases.
	// Its counts rest between minutes of raw rows, as a background pass's may.
	r := &recon.Rollups{Store: rollupstore.New(p.DB).Paced(rollupstore.BackgroundPause), Clock: p.Clock, Interval: recon.DefaultRollupInterval, MinuteKeep: p.Config.RollupMinuteKeep,
		Overlap: recon.RollupOverlapFor(skewLimit(p.Config)), Role: p.role(recon.RollupRole, "rollups"), Logger: p.Logger}
	p.goLoop(ctx, r.Loop())
}
