package main

import "time"

// Every background role of serve runs on every replica. Those whose work must be done once
// by someone (the reconciler, the alert evaluator) take a lease row first, renewed by its
// holder; those that must not overlap (rollups, the body purge) take a transaction-scoped
// advisory lock around each pass; the rest are safe on all because each item of their work
// is claimed in its own row (the reaper, the job workers, the outbox relays, the bulk
// lookups) or repeating them changes nothing (pruning, the session sweep). Nothing holds a session between
// transactions, so a pooler in transaction mode may stand in front of Postgres.

// Bounds of SETTLE_ROLE_LEASE: the holder renews it every third, at least a second apart.
const (
	defaultRoleLease = 30 * time.Second
	minRoleLease     = 3 * time.Second
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
	return d, nil
}
