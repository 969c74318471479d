package desk

import (
	"context"
	"fmt"
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

// notExecutedHint tells a person what a lookup that found nothing lets them do: a close as
// not executed only where the close would accept it (ops rules 11 and 12).
func (d *Desk) notExecutedHint(ctx context.Context, op *ops.Operation, now time.Time) string {
	if !op.PastRetention(now) {
		if op.RetryUntil != nil {
			return fmt.Sprintf("The provider keeps its key until %s; until then a resend with the same key is still safe, and it cannot be closed as not executed.", op.RetryUntil.UTC().Format(time.RFC3339))
		}
		return "It was never sent, or its provider keeps no keys; close it by hand with a note."
	}
	attempts, err := d.Ledger.Attempts(ctx, op.ID)
	if err != nil {
		return "Its attempts could not be read, so Settle cannot tell whether a close as not executed would be accepted; look again."
	}
	if err := d.CheckNotExecuted(op, attempts, now); err != nil {
		return ops.ErrorMessage(err)
	}
	return "Its key retention has passed and no attempt may still be sending, so it can be closed as not executed."
}
