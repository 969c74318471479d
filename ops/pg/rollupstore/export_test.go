package rollupstore

import (
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/recon"
)

// RollupReadSettings and RollupCountsSQL are a read of the rollups' planner settings and
// its query of the counts; RollupArgs are that query's arguments for a filter.
const RollupReadSettings = rollupReadSettings

var RollupCountsSQL = rollupCountsSQL

func RollupArgs(f recon.MetricsFilter) pgx.NamedArgs { return rollupArgs(f) }

// CountRawSQL is the text of countRaw's queries, one run of each per range of raw rows
// counted.
var CountRawSQL = map[string]bool{countSQL: true}
