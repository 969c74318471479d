package llm

import "sync/atomic"

// counters count what the gateway did since it started; the ledger holds the durable facts.
type counters struct {
	requests, rejected, fresh, replays, inFlight, waited, conflicts atomic.Int64
	upstream, possibleDups, uncertain                               atomic.Int64
	// pendingCloses is a gauge: calls answered early whose close is still being written.
	pendingCloses atomic.Int64
}

// Stats is a snapshot of the gateway's counters.
type Stats struct {
	// Requests counts client requests; Rejected those refused before admission (bad key,
	// bad body); New those that opened an operation.
	Requests, Rejected, New int64
	// Replays counts answers served from a stored or in-flight generation.
	Replays int64
	// InFlight counts 409 answers while the key was in flight; Waited, answers that
	// waited for the request in flight (Prefer: wait, or a streaming retry that followed its
	// stream); Conflicts, 422 answers for another fingerprint.
	InFlight, Waited, Conflicts int64
	// UpstreamCalls counts sends to the provider; PossibleDuplicates those that followed
	// an attempt whose outcome was uncertain; Uncertain the attempts that ended so.
	UpstreamCalls, PossibleDuplicates, Uncertain int64
	// PendingCloses is not a counter but the number of calls answered before their close
	// (early.go) whose close is still being written: a backlog there is a database that
	// falls behind while clients are served, and what Drain waits for at shutdown.
	PendingCloses int64
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() Stats {
	c := &g.stats
	return Stats{Requests: c.requests.Load(), Rejected: c.rejected.Load(), New: c.fresh.Load(), Replays: c.replays.Load(),
		InFlight: c.inFlight.Load(), Waited: c.waited.Load(), Conflicts: c.conflicts.Load(),
		UpstreamCalls: c.upstream.Load(), PossibleDuplicates: c.possibleDups.Load(), Uncertain: c.uncertain.Load(),
		PendingCloses: c.pendingCloses.Load()}
}

// PendingCloses is the number of calls whose client had its whole answer and whose close
// is still being written (Stats.PendingCloses), for the settle_llm_pending_closes gauge.
func (g *Gateway) PendingCloses() int64 {
	return g.stats.pendingCloses.Load()
}
