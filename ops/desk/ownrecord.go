package desk

import (
	"context"
	"fmt"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
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
	switch outcome {
	case ops.OutcomeOtherAmount:
		why = fmt.Sprintf("moved %s, not the %s this operation refunds", ops.FormatMoney(rec.AmountCents, rec.Currency),
			ops.FormatMoney(op.AmountCents, op.Currency))
	case ops.OutcomeOtherPayment:
		why = fmt.Sprintf("refunds the payment %s, not this operation's %s", rec.PaymentRef, op.PaymentRef)
	}
	return fmt.Sprintf("%s holds %s, which names this operation but %s: it is not this operation's refund, so nothing was closed. "+
		"Reconciliation raises it as an orphan charge; find out who made it before closing this operation.", op.Provider, rec.Ref, why)
}

// checkRecord runs every check of the record a person gives to close op as to: whose
// record Settle knows it to be, then what the provider holds under it.
func (d *Desk) checkRecord(ctx context.Context, op *ops.Operation, to ops.Status, ref string) error {
	if err := d.checkRecordIsOurs(ctx, op, ref); err != nil {
		return err
	}
	if err := d.checkAnswerAtProvider(ctx, op, to, ref); err != nil {
		return err
	}
	return d.checkRefundAtProvider(ctx, op, to, ref)
}

// checkAnswerAtProvider refuses a close as succeeded of an LLM operation with a record the
// provider holds as another call's, or as a generation that ended without an answer (a
// response it failed or cancelled), or does not hold at all, where the provider can be asked
// about the call: the close would show op as succeeded against the provider's own word, or
// on the person's word alone (ops rule 9). A provider that cannot be asked now refuses it for
// now. It runs before a close is proposed, so no proposal is made that its approval would
// refuse; the close itself, and an approval's, fetches the answer again.
func (d *Desk) checkAnswerAtProvider(ctx context.Context, op *ops.Operation, to ops.Status, ref string) error {
	if ref == "" || to != ops.StatusSucceeded || !d.Ledger.Kind(op.Kind).Generation {
		return nil
	}
	_, _, err := d.answerFor(ctx, op, ref)
	return err
}

// checkRefundAtProvider asks the provider about the refund id a person gives to close op as
// succeeded, and refuses it when the provider holds it as something other than op's refund:
// a refund that failed or was canceled, one of another payment, of another operation, or
// of another amount, or one it does not hold at all. A tired engineer pasting the row
// beside's id, one from another charge, or one mistyped would otherwise tell op's customer
// of money that never reached them (ops rules 9 and 12). A provider that cannot be asked
// refuses the close for now: nothing says the id is op's.
func (d *Desk) checkRefundAtProvider(ctx context.Context, op *ops.Operation, to ops.Status, ref string) error {
	// Only the refund provider's own records are its to judge: an operation of another
	// provider, or one refunding no payment, names records it does not hold.
	if ref == "" || to != ops.StatusSucceeded || d.Refunds == nil || op.PaymentRef == "" || op.Provider != d.Refunds.Provider.Name() {
		return nil
	}
	rr, ok := d.Refunds.Provider.(refund.RefundReader)
	if !ok {
		return nil
	}
	h, err := rr.Refund(ctx, op, ref)
	switch {
	case ops.ErrorCode(err) == ops.ENOTFOUND:
		// An id the provider does not hold is no evidence at all: a typo or a made-up id
		// would show op as succeeded on the person's word alone.
		return &ops.Error{Code: ops.EINVALID, Message: fmt.Sprintf(
			"%s; check the id (%s): a close as succeeded needs a refund the provider holds for this operation, so nothing was closed.",
			strings.TrimSuffix(ops.ErrorMessage(err), "."), d.Ledger.Kind(op.Kind).RecordOf(op).Hint), Err: err}
	case err != nil:
		return &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf(
			"%s could not be asked whether %s is this operation's refund; try again in a moment.", op.Provider, ref), Err: err}
	}
	if why := notThisRefund(op, h); why != "" {
		return ops.Errorf(ops.EINVALID, "%s holds %s, but %s: it is not this operation's refund.", op.Provider, ref, why)
	}
	return nil
}

// notThisRefund says how the refund h the provider holds differs from op's, or "".
func notThisRefund(op *ops.Operation, h refund.Held) string {
	rec := h.Record
	switch {
	case h.PaymentRef != op.PaymentRef:
		return fmt.Sprintf("it refunds the payment %s, not this operation's %s", h.PaymentRef, op.PaymentRef)
	case rec.OperationID != "" && rec.OperationID != op.ID:
		return fmt.Sprintf("it was made for operation %s", rec.OperationID)
	case !rec.Charged():
		return fmt.Sprintf("its status is %s, so it refunded nothing", rec.Status)
	case rec.AmountCents != op.AmountCents || !strings.EqualFold(rec.Currency, op.Currency):
		return fmt.Sprintf("it moved %s, not the %s this operation refunds", ops.FormatMoney(rec.AmountCents, rec.Currency),
			ops.FormatMoney(op.AmountCents, op.Currency))
	}
	return ""
}
