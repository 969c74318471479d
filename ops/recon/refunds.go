package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// reconcileRefunds records every refund of the window, closes what they explain, and
// reports double, orphan and missing charges.
func (r *Reconciler) reconcileRefunds(ctx context.Context, src RefundSource, w Window, rep *Report) error {
	provider := src.Name()
	recs, err := src.ListRefunds(ctx, w.From, w.To)
	if err != nil {
		return fmt.Errorf("list %s refunds: %w", provider, err)
	}
	rep.Listed = len(recs)
	refs := make([]string, 0, len(recs))
	for _, rec := range recs {
		refs = append(refs, rec.Ref)
	}
	known, err := r.Store.KnownCharges(ctx, provider, refs)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := r.apply(ctx, rec, known, rep); err != nil {
			return err
		}
	}
	if err := r.Store.MarkReconciled(ctx, provider, refs, r.Ledger.Clock.Now()); err != nil {
		return err
	}
	// Succeeded operations whose charge the listing did not show: the refund may have been
	// made outside the window (a resend hours later), so ask about each one before calling
	// it missing.
	cands, err := r.Store.MissingCandidates(ctx, provider, w, orDefault(r.MissingBatch, DefaultMissingBatch))
	if err != nil {
		return err
	}
	for _, op := range cands {
		res, err := src.Lookup(ctx, op)
		if err != nil {
			return fmt.Errorf("look up operation %s at %s: %w", op.ID, provider, err)
		}
		rep.Looked++
		charged := false
		var found []string
		for _, rec := range res.Records {
			found = append(found, rec.Ref)
		}
		seen, err := r.Store.KnownCharges(ctx, provider, found)
		if err != nil {
			return err
		}
		for ref := range seen {
			known[ref] = true
		}
		for _, rec := range res.Records {
			if err := r.apply(ctx, rec, known, rep); err != nil {
				return err
			}
			charged = charged || rec.Charged()
		}
		if err := r.Store.MarkReconciled(ctx, provider, found, r.Ledger.Clock.Now()); err != nil {
			return err
		}
		refs = append(refs, found...)
		if !charged {
			if err := r.missing(ctx, op, res, rep); err != nil {
				return err
			}
		}
	}
	doubles, err := r.Store.DoubleCharges(ctx, provider, refs)
	if err != nil {
		return err
	}
	for _, d := range doubles {
		if err := r.double(ctx, provider, d, rep); err != nil {
			return err
		}
	}
	return nil
}

// apply records one provider record through the ledger, which closes the operation it
// explains if nobody is sending for it and nobody closed it first.
func (r *Reconciler) apply(ctx context.Context, rec ops.ProviderRecord, known map[string]bool, rep *Report) error {
	ev := ops.Evidence{Kind: ops.EvidenceReconciliation,
		Summary: fmt.Sprintf("Reconciliation found %s at %s: %s, %s.", rec.Ref, rec.Provider, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status)}
	applied, err := r.Ledger.ApplyRecord(ctx, r.Store, rec, ev, r.actor(rec.Provider))
	if err == nil || ops.ErrorCode(err) == ops.EINVALID || ops.ErrorCode(err) == ops.ECONFLICT {
		// The charge is recorded before the ledger decides about the operation.
		if !known[rec.Ref] {
			known[rec.Ref] = true
			rep.NewCharges++
		}
	}
	if code := ops.ErrorCode(err); code == ops.EINVALID || code == ops.ECONFLICT {
		// The ledger refused the close (the operation is in no state a record can close, or
		// it changed under us): the charge is recorded, and one odd row must not stop the
		// run for every other record. The next run tries again.
		r.logger().Warn("reconciliation could not apply a provider record", "provider", rec.Provider, "ref", rec.Ref,
			"operation_id", rec.OperationID, "err", err)
		rep.Refused++
		return nil
	} else if err != nil {
		return fmt.Errorf("apply %s %s: %w", rec.Provider, rec.Ref, err)
	}
	now := r.Ledger.Clock.Now()
	switch applied.Outcome {
	case "closed":
		rep.Closed++
		op := applied.Op
		return r.record(ctx, rep, Finding{Kind: ExceptionExplainedUnknown, Provider: rec.Provider, Ref: op.ID,
			TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
			Summary: fmt.Sprintf("Operation %s had no known outcome; %s shows %s (%s, %s).", op.ID, rec.Provider, rec.Ref,
				ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status),
			Resolved: true, Note: fmt.Sprintf("Closed as %s by reconciliation with %s as evidence.", op.Status, rec.Ref),
			Details: details(op, rec), Actor: r.actor(rec.Provider), At: now})
	case "orphan":
		if !rec.Charged() {
			return nil // a refund that failed moved no money: recorded, nothing to settle
		}
		rep.Orphans++
		why := "carries no settle_operation_id"
		if rec.OperationID != "" {
			why = fmt.Sprintf("names operation %q, which Settle does not have", truncate(rec.OperationID, 80))
		}
		return r.record(ctx, rep, Finding{Kind: ExceptionOrphanCharge, Provider: rec.Provider, Ref: rec.Ref,
			ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
			Summary: fmt.Sprintf("%s %s (%s, %s) %s.", rec.Provider, rec.Ref, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status, why),
			Details: details(nil, rec), Actor: r.actor(rec.Provider), At: now})
	case "already_closed":
		op := applied.Op
		if op != nil && op.Status == ops.StatusFailed && rec.Charged() {
			rep.ChargedFailed++
			return r.record(ctx, rep, Finding{Kind: ExceptionChargeOnFailed, Provider: rec.Provider, Ref: op.ID,
				TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
				Summary: fmt.Sprintf("Operation %s was closed as failed by %s, but %s shows %s (%s, %s).", op.ID, op.ClosedBy,
					rec.Provider, rec.Ref, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status),
				Details: details(op, rec), Actor: r.actor(rec.Provider), At: now})
		}
	case "in_flight":
		rep.InFlight++
	}
	return nil
}

func (r *Reconciler) missing(ctx context.Context, op *ops.Operation, res ops.LookupResult, rep *Report) error {
	rep.Missing++
	shows := "no refund carrying its id"
	var refs []string
	for _, rec := range res.Records {
		refs = append(refs, rec.Ref)
	}
	if len(refs) > 0 {
		shows = "only refunds that did not go through (" + strings.Join(refs, ", ") + ")"
	}
	return r.record(ctx, rep, Finding{Kind: ExceptionMissingCharge, Provider: op.Provider, Ref: op.ID,
		TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: refs, AmountCents: op.AmountCents, Currency: op.Currency,
		Summary: fmt.Sprintf("Operation %s was closed as succeeded (%s) by %s, but %s shows %s.", op.ID, op.ProviderRef,
			op.ClosedBy, op.Provider, shows),
		Details: details(op), Actor: r.actor(op.Provider), At: r.Ledger.Clock.Now()})
}

func (r *Reconciler) double(ctx context.Context, provider string, d DoubleCharge, rep *Report) error {
	rep.DoubleCharges++
	var refs []string
	var extra int64
	currency := ""
	for i, c := range d.Charges {
		refs = append(refs, c.Ref)
		if i > 0 {
			extra += c.AmountCents
		}
		currency = c.Currency
	}
	b, _ := json.Marshal(map[string]any{"operation_id": d.OperationID, "charges": d.Charges})
	return r.record(ctx, rep, Finding{Kind: ExceptionDoubleCharge, Provider: provider, Ref: d.OperationID,
		TenantID: d.TenantID, OperationID: d.OperationID, ChargeRefs: refs, AmountCents: extra, Currency: currency,
		Summary: fmt.Sprintf("Operation %s was charged %d times at %s (%s); %s more than once.", d.OperationID, len(d.Charges),
			provider, strings.Join(refs, ", "), ops.FormatMoney(extra, currency)),
		Details: b, Actor: r.actor(provider), At: r.Ledger.Clock.Now()})
}

// details is what the exception keeps of what the reconciler saw.
func details(op *ops.Operation, recs ...ops.ProviderRecord) json.RawMessage {
	m := map[string]any{}
	if op != nil {
		m["operation"] = map[string]any{"id": op.ID, "status": op.Status, "amount_cents": op.AmountCents, "currency": op.Currency,
			"provider_ref": op.ProviderRef, "closed_by": op.ClosedBy, "version": op.Version}
	}
	var rs []map[string]any
	for _, rec := range recs {
		rs = append(rs, map[string]any{"ref": rec.Ref, "operation_id": rec.OperationID, "amount_cents": rec.AmountCents,
			"currency": rec.Currency, "status": rec.Status, "created": rec.Created})
	}
	if rs != nil {
		m["records"] = rs
	}
	b, _ := json.Marshal(m)
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
