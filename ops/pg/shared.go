package pg

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// This file is what the use cases' stores under ops/pg (alertstore, retainstore, ...) share
// with the ledger's store: the mapping of database errors, the singleton leases and the SQL
// fragments that more than one store's statements must word the same way.

// Interpret maps a database error to the domain's, as every store's statements must: an
// unreachable database is ops.DatabaseUnreachable, a unique or rule violation the caller's
// conflict or mistake, a cancelled context stays itself, anything else is internal.
func Interpret(err error, what string) error { return interpret(err, what) }

// Translate is Interpret for statements whose other errors are theirs to word: only an
// unreachable database is mapped, anything else is returned wrapped with what.
func Translate(err error, what string) error { return translate(err, what) }

// HoldLease is the first statement of a transaction that must run only while l is held: it
// locks l's row in share mode and reports false when l is no longer held at now. A zero l
// holds nothing and is always true.
func HoldLease(ctx context.Context, tx pgx.Tx, l ops.Lease, now time.Time) (bool, error) {
	return holdLease(ctx, tx, l, now)
}

// LockLeaseRow locks the row of the lease name until tx ends: in share mode for a pass of
// the role, exclusively for other work that must not run beside one.
func LockLeaseRow(ctx context.Context, tx pgx.Tx, name string, exclusive bool) error {
	return lockLeaseRow(ctx, tx, name, exclusive)
}

// ChargedStatuses is the SQL list of the provider charge statuses that took money; it must
// match ops.ProviderRecord.Charged.
const ChargedStatuses = `('succeeded', 'pending', 'requires_action')`

// BinOrigin anchors the hour and day buckets of every count on UTC midnight.
const BinOrigin = `'2000-01-01 00:00:00+00'::timestamptz`

// DoubleGenerations selects, over recon_exceptions e joined to operations o, the confirmed
// double generations of LLM operations: the double-charge exceptions that lookups and usage
// reports record for them, counted like the second refund of a refund's double charge. An
// operation whose extra generations are provider charges of their own is counted by those
// charges instead, never twice. Each costs what the stored generation cost, in USD. The
// reconciliation table and the alerts count them alike.
const DoubleGenerations = `e.kind = 'double_charge' AND o.kind IN ('llm_call', 'llm_job')
		AND (SELECT count(*) FROM provider_charges p2 WHERE p2.operation_id = o.id AND p2.status IN ` + ChargedStatuses + `) < 2`

// ExtraGenerations is how many generations beyond the first an exception e of
// DoubleGenerations stands for: its charge references name every generation billed, and
// one at least is extra.
const ExtraGenerations = `greatest(cardinality(e.charge_refs) - 1, 1)`

// OpCols are the operations columns, over alias o, that CollectOps reads.
const OpCols = opCols

// CollectOps reads every row of OpCols, closing rows.
func CollectOps(rows pgx.Rows) ([]*ops.Operation, error) { return collectOps(rows) }

// NullTime is t, or SQL NULL when ok is false.
func NullTime(ok bool, t time.Time) any { return nullTime(ok, t) }

// NullStr is s, or SQL NULL when s is empty.
func NullStr(s string) any { return nullStr(s) }

// JSONOrNil is b as JSON text, or SQL NULL when b is empty.
func JSONOrNil(b json.RawMessage) any { return jsonOrNil(b) }

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
