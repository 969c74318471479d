package pg

import (
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// This file keeps what the reconciler's store (ops/pg/reconstore) shares with the statements
// still here: the findings that the refund tool records as well, and the counts and rollups
// that word charges and buckets the same way.

var _ recon.MetricsStore = (*DB)(nil)

// chargedStatuses is the SQL list of provider statuses that mean money moved; it must match
// ops.ProviderRecord.Charged.
const chargedStatuses = `('succeeded', 'pending', 'requires_action')`

// binOrigin anchors hour and day buckets on UTC midnight.
const binOrigin = `'2000-01-01 00:00:00+00'::timestamptz`

const exCols = `e.id, e.kind, e.provider, e.ref, coalesce(e.tenant_id, 0), coalesce(e.operation_id::text, ''), e.charge_refs,
	e.severity, e.status, e.assignee, e.note, e.summary, e.amount_cents, e.currency, e.details, e.version, e.seen_count,
	e.first_seen_at, e.last_seen_at, e.updated_at, e.resolved_at, e.resolved_by`

func scanException(row pgx.Row) (*recon.Exception, error) {
	var e recon.Exception
	var kind, sev, status string
	err := row.Scan(&e.ID, &kind, &e.Provider, &e.Ref, &e.TenantID, &e.OperationID, &e.ChargeRefs, &sev, &status,
		&e.Assignee, &e.Note, &e.Summary, &e.AmountCents, &e.Currency, &e.Details, &e.Version, &e.SeenCount,
		&e.FirstSeenAt, &e.LastSeenAt, &e.UpdatedAt, &e.ResolvedAt, &e.ResolvedBy)
	if err != nil {
		return nil, err
	}
	e.Kind, e.Severity, e.Status = recon.ExceptionKind(kind), recon.Severity(sev), recon.ExceptionStatus(status)
	return &e, nil
}

// exceptionState is what the audit log keeps of an exception before and after a change.
func exceptionState(e *recon.Exception) []byte {
	b, _ := json.Marshal(map[string]any{"status": e.Status, "severity": e.Severity, "assignee": e.Assignee,
		"version": e.Version, "charge_refs": e.ChargeRefs})
	return b
}

// ExceptionCols are the recon_exceptions columns, over alias e, that ScanException reads.
const ExceptionCols = exCols

// ScanException reads one row of ExceptionCols.
func ScanException(row pgx.Row) (*recon.Exception, error) { return scanException(row) }

// ExceptionState is what the audit log keeps of an exception before and after a change.
func ExceptionState(e *recon.Exception) []byte { return exceptionState(e) }

// BinOrigin anchors the hour and day buckets of every count on UTC midnight.
const BinOrigin = binOrigin

// OpCols are the operations columns, over alias o, that CollectOps reads.
const OpCols = opCols

// CollectOps reads every row of OpCols, closing rows.
func CollectOps(rows pgx.Rows) ([]*ops.Operation, error) { return collectOps(rows) }
