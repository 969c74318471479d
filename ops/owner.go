package ops

import (
	"crypto/rand"
	"encoding/hex"
)

// NewOwner names a holder of leases (of operations, jobs, bulk lookups and the singleton
// roles) as it is written in the lease and the audit log. With where, the name is
// "<role>:<where>": what holds the lease ("reaper", "alerts", "jobs") and the worker or job
// it does so for, which must be unique among live holders. Without where, it is
// "<role>#<token>" with a random token, for a holder that lives as long as one request or
// one run: role may then be a whole owner, as a reconciler's run is "reconciler:<worker
// id>#<token>", so two runs in one process exclude each other as two processes do.
func NewOwner(role, where string) string {
	if where != "" {
		return role + ":" + where
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return role + "#" + hex.EncodeToString(b[:])
}
