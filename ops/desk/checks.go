package desk

import (
	"time"

	"github.com/settle-dev/settle/ops"
)

// CheckManualFail says why a person may not close op as failed with a note now (ops rule
// 11: the provider may have run it), or nil.
func (d *Desk) CheckManualFail(op *ops.Operation, attempts []ops.Attempt, now time.Time) error {
	return ops.CheckFail(op, attempts, ops.Evidence{Kind: ops.EvidenceNote, Summary: "note"}, op.Policy, now, d.Ledger.Limits)
}

// CheckNotExecuted says why op may not be closed as not executed now under the ledger's
// limits (ops rule 11), or nil; the close itself also needs a fresh lookup that finds nothing.
func (d *Desk) CheckNotExecuted(op *ops.Operation, attempts []ops.Attempt, now time.Time) error {
	return ops.CheckNotExecuted(op, attempts, now, d.Ledger.Limits)
}
