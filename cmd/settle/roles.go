package main

import "time"

// Every background service of serve runs on every replica, as a loop (ops.Loop). Those whose
// work must be done by one replica at a time (the reconciler of each provider, the alert
// evaluator, the rollup job, the body purge, the retention) do it under a role (ops.Role): a
// row of the one leases table, taken in one statement, renewed by its holder every third of
// SETTLE_ROLE_LEASE while the work runs, and released when it ends (the evaluator keeps its
// role from one pass to the next); the transactions of the rollups, the purge and the
// retention, and the reconciler's record of a run, are matched on its token. The rest
// are safe on all because each item of their work is claimed in its own row (the reaper, the
// job workers, the outbox relays, the bulk lookups) or repeating them changes nothing (the
// session sweep). Nothing holds a session between transactions, so a pooler in transaction
// mode may stand in front of Postgres.

// Bounds of SETTLE_ROLE_LEASE: the holder renews it every third, at least a second apart,
// and a replica killed holding a role holds it up for at most as long as the longest
// operation lease (maxOperationLease): longer is a slip of the unit, not a choice.
const (
	defaultRoleLease = 30 * time.Second
	minRoleLease     = 3 * time.Second
	maxRoleLease     = maxOperationLease
)

// roleLeaseEnv reads SETTLE_ROLE_LEASE: how long a role that runs on one replica at a time
// stays with a replica that stopped renewing it, killed or cut off from the database. Short
// means a quick takeover; the holder must reach the database at least once in a third of it.
func roleLeaseEnv(e environ) (time.Duration, error) {
	d, err := e.duration(envRoleLease, defaultRoleLease)
	if err != nil {
		return 0, err
	}
	if d < minRoleLease {
		return 0, usagef("%s=%s is shorter than %s", envRoleLease.Name, d, minRoleLease)
	}
	if d > maxRoleLease {
		return 0, usagef("%s=%s is longer than %s: a replica killed holding a role would hold up the reconciler and the retention that long", envRoleLease.Name, d, maxRoleLease)
	}
	return d, nil
}
