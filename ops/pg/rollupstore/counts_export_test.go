package rollupstore

import (
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/recon"
)

// CountRawArgs are the arguments of CountRawSQL's queries for a filter.
func CountRawArgs(f recon.MetricsFilter) pgx.NamedArgs { return metricsArgs(f) }

// NoJITSQL is what countRaw and a rollup pass run first in their transaction.
const NoJITSQL = noJITSQL
