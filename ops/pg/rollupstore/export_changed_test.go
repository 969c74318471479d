package rollupstore

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/recon"
)

// ChangedMinutesSQL is the rollup job's query of the older minutes whose rows changed;
// ChangedMinutesArgs its arguments for a pass whose fresh window starts at from.
var ChangedMinutesSQL = changedMinutesSQL

func ChangedMinutesArgs(st recon.RollupState, p recon.RollupParams, from time.Time) pgx.NamedArgs {
	return changedMinutesArgs(st, p, from)
}
