package main

import (
	"time"

	"github.com/settle-dev/settle/ops"
)

// Bounds of SETTLE_OPERATION_LEASE. An attempt in flight renews its lease every third of it,
// and a call keeps its lease between attempts, so the backoff between them and a wait for a
// provider's "key in use" are cut to half a lease (see operationLimits): the shortest lease
// leaves them at 2.5 s. The reaper passes at least every half lease.
const (
	minOperationLease   = 5 * time.Second
	maxOperationLease   = 10 * time.Minute
	maxReaperInterval   = 5 * time.Second
	minReaperInterval   = time.Second
	reaperPassesByLease = 2
)

// operationLeaseEnv reads SETTLE_OPERATION_LEASE: how long a replica owns an operation it is
// sending before another may take it over and send again with the same provider key. After a
// replica dies, or loses its database in a failover while a provider call is in flight, that
// operation waits this long to be resumed. Short means a quick resumption; the owner must
// reach the database at least once in a third of it, or a second replica resends a call still
// running (a refund stays single under Stripe's key, an LLM call may be billed twice).
func operationLeaseEnv(e environ) (time.Duration, error) {
	d, err := e.duration(envOperationLease, ops.DefaultLimits.Lease)
	if err != nil {
		return 0, err
	}
	if d < minOperationLease || d > maxOperationLease {
		return 0, usagef("%s=%s is outside %s to %s", envOperationLease.Name, d, minOperationLease, maxOperationLease)
	}
	return d, nil
}

// operationLimits are lim with an operation lease of d (none: lim as it is), and no wait
// between two attempts of a call that outlasts half of it.
func operationLimits(lim ops.Limits, d time.Duration) ops.Limits {
	if d <= 0 {
		return lim
	}
	lim.Lease = d
	lim.MaxBackoff = min(lim.MaxBackoff, d/2)
	lim.KeyInUseMaxWait = min(lim.KeyInUseMaxWait, d/2)
	return lim
}

// reaperInterval is how often the reaper looks for stalled operations under a lease of
// lease: 5 s, or half a lease when that is shorter, so a stalled operation waits at most
// half a lease more.
func reaperInterval(lease time.Duration) time.Duration {
	return max(min(maxReaperInterval, lease/reaperPassesByLease), minReaperInterval)
}
