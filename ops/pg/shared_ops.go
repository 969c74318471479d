package pg

import (
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// More of what the use cases' stores share with the ledger's store (see shared.go): the
// operations and attempts read as the ledger's store reads them and the open statuses as
// its statements spell them.

// OpenStatuses is the open statuses as SQL text for "status IN": ('received', ...).
var OpenStatuses = openStatuses

// OpenStatusArray is the open statuses as an SQL array, for unnest.
var OpenStatusArray = openStatusArray

// UnheldStatuses is the open statuses but in_progress as SQL text for "status IN": the rows
// operations_queue_idx keeps.
var UnheldStatuses = unheldStatuses

// UnheldStatusArray is UnheldStatuses as an SQL array, for unnest.
var UnheldStatusArray = unheldStatusArray

// ScanOp reads one operation in OpCols' order, then extra columns into extra.
func ScanOp(row pgx.Row, extra ...any) (*ops.Operation, error) { return scanOp(row, extra...) }

// AttemptCols are the columns of the attempts table that ScanAttempt reads.
const AttemptCols = attemptCols

// ScanAttempt reads one attempt in AttemptCols' order.
func ScanAttempt(r pgx.CollectableRow) (ops.Attempt, error) { return scanAttempt(r) }

// SQLState returns the SQLSTATE of a Postgres error in err's chain, "" for other errors.
func SQLState(err error) string { return sqlState(err) }

// CheckTenantName refuses, in words, a tenant name the tenants table would refuse.
func CheckTenantName(name string) error { return checkTenantName(name) }

// NewToken returns a new API token and its SHA-256, which is all that is stored.
func NewToken() (string, [32]byte, error) { return newToken() }
