package desk

import (
	"context"
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// checkRecordIsOurs refuses a close by hand that names, as op's record, a provider's record
// Settle knows to be another operation's: a refund id pasted from the row beside would tell
// op's customer that a refund made for someone else was theirs (ops rules 9 and 12), and
// close op's intent with nothing refunded for it.
func (d *Desk) checkRecordIsOurs(ctx context.Context, op *ops.Operation, ref string) error {
	if ref == "" || d.Events == nil {
		return nil
	}
	owner, err := d.Events.RecordOwner(ctx, op.Provider, ref, op.ID)
	if err != nil {
		return fmt.Errorf("check whose record %s is: %w", ref, err)
	}
	if owner != "" {
		return ops.Errorf(ops.EINVALID, "%s is the provider's record of operation %s, not of this one: give this operation's own record id (%s).",
			ref, owner, d.Ledger.Kind(op.Kind).RecordOf(op).Hint)
	}
	return nil
}
