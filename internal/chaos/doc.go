// Package chaos is a deterministic simulation of Settle's three paid flows (refunds through
// the refund tool, LLM calls through the gateway, pipeline jobs through their workers)
// against the fake Stripe and the fake LLM, on the project's private PostgreSQL. Each seed
// draws one short fault schedule: provider faults by call number, duplicate requests sent
// at once, worker crashes at every crash point, clock jumps past leases and key retention,
// and people looking operations up and closing them. After each schedule the invariants of
// package ops are checked against the ledger and against the fakes' own records.
//
// The package holds only tests: `make chaos` runs 10,000 seeds, `make chaos SEED=n` one,
// and `make test` runs 300 (SETTLE_CHAOS_SEEDS, SETTLE_CHAOS_SEED).
package chaos
