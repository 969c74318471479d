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

// notItsRecord tells a person why the provider's record naming op closes nothing: showing op
// as refunded on evidence of another sum, or of another account's money, would say more
// than Settle knows (ops rules 9 and 12).
func notItsRecord(op *ops.Operation, rec ops.ProviderRecord, outcome string) string {
	why := "comes from another provider account than the one this operation was sent to"
	if outcome == ops.OutcomeOtherAmount {
		why = fmt.Sprintf("moved %s, not the %s this operation refunds", ops.FormatMoney(rec.AmountCents, rec.Currency),
			ops.FormatMoney(op.AmountCents, op.Currency))
	}
	return fmt.Sprintf("%s holds %s, which names this operation but %s: it is not this operation's refund, so nothing was closed. "+
		"Reconciliation raises it as an orphan charge; find out who made it before closing this operation.", op.Provider, rec.Ref, why)
}
