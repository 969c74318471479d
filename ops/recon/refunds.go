package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// reconcileRefunds records every refund of the window, closes what they explain, and
// reports double, orphan and missing charges. The listing is applied a batch at a time as it
// is read, so a window of millions of refunds never sits in memory. A source that could
// list only some of its accounts lists the rest with an error: that much is applied, the
// missing-charge lookups wait for a complete listing, and the run fails so the window is
// read again.
func (r *Reconciler) reconcileRefunds(ctx context.Context, src RefundSource, w Window, rep *Report) error {
	provider := src.Name()
	known := map[string]bool{}
	// Double charges are asked for batch by batch, for the charges just recorded: a double is
	// found with the batch that records the second of its charges. reported holds how many
	// charges each double was reported with in this run.
	reported := map[string]int{}
	// The provider says nothing of how many refunds there are, and may list parts of the
	// window at once: progress is how much of the window's time the listed batches span, in
	// minutes.
	pr := r.progress()
	total := int(w.To.Sub(w.From) / time.Minute)
	pr.Start(total, "minutes")
	covered := 0
	var spanned time.Duration
	// The listing reads the next pages while the batch before is applied: the provider and
	// the database each wait for the other only when one is twice as slow.
	batches := make(chan []ops.ProviderRecord, 1)
	failed := make(chan struct{})
	var applyErr error
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for batch := range batches {
			if applyErr != nil {
				continue
			}
			if applyErr = r.applyBatch(ctx, provider, batch, known, reported, rep); applyErr != nil {
				close(failed)
				continue
			}
			rep.Listed += len(batch)
			spanned += span(batch)
			if m := min(total, int(spanned/time.Minute)); m > covered {
				pr.Add(m - covered)
				covered = m
			}
		}
	}()
	listErr := src.ListRefunds(ctx, w.From, w.To, func(batch []ops.ProviderRecord) error {
		select {
		case batches <- batch:
			return nil
		case <-failed:
			return errApplyFailed
		}
	})
	close(batches)
	<-applied
	if listErr == nil && applyErr == nil {
		pr.Add(total - covered)
	}
	pr.Done()
	if applyErr != nil {
		return applyErr
	}
	if listErr != nil && rep.Listed == 0 {
		return fmt.Errorf("list %s refunds: %w", provider, listErr)
	}
	if listErr == nil {
		found, err := r.lookUpMissing(ctx, src, w, known, rep)
		if err != nil {
			return err
		}
		if err := r.doubles(ctx, provider, found, reported, rep); err != nil {
			return err
		}
	}
	if listErr != nil {
		return fmt.Errorf("list %s refunds (what was listed is applied; the window is read again): %w", provider, listErr)
	}
	return nil
}

// span is the time between the oldest and the newest record of batch.
func span(batch []ops.ProviderRecord) time.Duration {
	var oldest, newest time.Time
	for _, rec := range batch {
		if rec.Created.IsZero() {
			continue
		}
		if oldest.IsZero() || rec.Created.Before(oldest) {
			oldest = rec.Created
		}
		if rec.Created.After(newest) {
			newest = rec.Created
		}
	}
	return newest.Sub(oldest)
}

// errApplyFailed stops a listing whose records could not be applied; the apply error is the
// one returned.
var errApplyFailed = errors.New("applying the listed refunds failed")

// applyBatch records one batch of listed refunds. Those that only confirm what the ledger
// holds (an operation of the record's own account that succeeded with that very charge) are
// recorded together in a few statements; every other record goes through the ledger one by
// one, which closes, fails or flags what it explains. Then the batch's double charges are
// reported.
func (r *Reconciler) applyBatch(ctx context.Context, provider string, batch []ops.ProviderRecord, known map[string]bool, reported map[string]int, rep *Report) error {
	matched, err := r.Store.RecordMatchedCharges(ctx, provider, batch, r.Ledger.Clock.Now())
	if err != nil {
		return err
	}
	// Double charges are asked for the charges the ledger must see and those that share
	// their operation with another charge; a charge that only confirms its operation and
	// is its only charge cannot make a double.
	var rest, check []string
	for _, rec := range batch {
		if m, ok := matched[rec.Ref]; ok {
			// Not kept in known: a window of a million refunds would hold a million refs,
			// and a ref listed again is simply Known the second time.
			if !m.Known {
				rep.NewCharges++
			}
			if m.Shared {
				check = append(check, rec.Ref)
			}
			continue
		}
		rest = append(rest, rec.Ref)
	}
	if err := r.applyRest(ctx, provider, batch, matched, rest, known, rep); err != nil {
		return err
	}
	return r.doubles(ctx, provider, append(check, rest...), reported, rep)
}

// applyRest records through the ledger, one by one, the records of batch that did not
// only confirm it (rest, by ref), and marks their charges reconciled.
func (r *Reconciler) applyRest(ctx context.Context, provider string, batch []ops.ProviderRecord, matched map[string]MatchedCharge,
	rest []string, known map[string]bool, rep *Report) error {
	if len(rest) == 0 {
		return nil
	}
	seen, err := r.Store.KnownCharges(ctx, provider, rest)
	if err != nil {
		return err
	}
	for ref := range seen {
		known[ref] = true
	}
	for _, rec := range batch {
		if _, ok := matched[rec.Ref]; ok {
			continue
		}
		if err := r.apply(ctx, rec, known, rep); err != nil {
			return err
		}
	}
	return r.Store.MarkReconciled(ctx, provider, rest, r.Ledger.Clock.Now())
}

// doublesBatch bounds how many charges one question about double charges names.
const doublesBatch = 10000

// doubles reports each operation that the given charges show charged more than once, unless
// reported has it with as many charges already. One charged a third time in a later batch is
// recorded again with all of them (its exception then counts one sighting more in this run).
func (r *Reconciler) doubles(ctx context.Context, provider string, refs []string, reported map[string]int, rep *Report) error {
	for len(refs) > 0 {
		n := min(len(refs), doublesBatch)
		doubles, err := r.Store.DoubleCharges(ctx, provider, refs[:n])
		if err != nil {
			return err
		}
		refs = refs[n:]
		for _, d := range doubles {
			before := reported[d.OperationID]
			if len(d.Charges) <= before {
				continue
			}
			reported[d.OperationID] = len(d.Charges)
			if err := r.double(ctx, provider, d, before > 0, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookUpMissing asks about each succeeded operation whose charge the listing did not show:
// the refund may have been made outside the window (a resend hours later), so it is looked
// up before it is called missing. It returns the refs the lookups found.
func (r *Reconciler) lookUpMissing(ctx context.Context, src RefundSource, w Window, known map[string]bool, rep *Report) ([]string, error) {
	provider := src.Name()
	cands, err := r.Store.MissingCandidates(ctx, provider, w, orDefault(r.MissingBatch, DefaultMissingBatch))
	if err != nil {
		return nil, err
	}
	var refs []string
	pr := r.progress()
	pr.Start(len(cands), "lookups")
	defer pr.Done()
	for _, op := range cands {
		res, err := src.Lookup(ctx, op)
		if err != nil {
			return refs, fmt.Errorf("look up operation %s at %s: %w", op.ID, provider, err)
		}
		rep.Looked++
		charged := false
		var found []string
		for _, rec := range res.Records {
			found = append(found, rec.Ref)
		}
		seen, err := r.Store.KnownCharges(ctx, provider, found)
		if err != nil {
			return refs, err
		}
		for ref := range seen {
			known[ref] = true
		}
		for _, rec := range res.Records {
			if err := r.apply(ctx, rec, known, rep); err != nil {
				return refs, err
			}
			charged = charged || rec.Charged()
		}
		if err := r.Store.MarkReconciled(ctx, provider, found, r.Ledger.Clock.Now()); err != nil {
			return refs, err
		}
		refs = append(refs, found...)
		pr.Add(1)
		if !charged {
			if err := r.missing(ctx, op, res, rep); err != nil {
				return refs, err
			}
		}
	}
	return refs, nil
}

// apply records one provider record through the ledger, which closes the operation it
// explains if nobody is sending for it and nobody closed it first.
func (r *Reconciler) apply(ctx context.Context, rec ops.ProviderRecord, known map[string]bool, rep *Report) error {
	ev := ops.Evidence{Kind: ops.EvidenceReconciliation,
		Summary: fmt.Sprintf("Reconciliation found %s at %s: %s, %s.", rec.Ref, rec.Provider, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status)}
	applied, err := r.Ledger.ApplyRecord(ctx, r.Events, rec, ev, r.actor(rec.Provider))
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
	switch o := applied.Outcome; {
	case o == "closed":
		rep.Closed++
		op := applied.Op
		return r.record(ctx, rep, Finding{Kind: ExceptionExplainedUnknown, Provider: rec.Provider, Ref: op.ID,
			TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
			Summary: fmt.Sprintf("Operation %s had no known outcome; %s shows %s (%s, %s).", op.ID, rec.Provider, rec.Ref,
				ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status),
			Resolved: true, Note: fmt.Sprintf("Closed as %s by reconciliation with %s as evidence.", op.Status, rec.Ref),
			Details: details(op, rec), Actor: r.actor(rec.Provider), At: now})
	case o == "orphan" || ops.NotItsRecord(o):
		if !rec.Charged() {
			return nil // a refund that failed moved no money: recorded, nothing to settle
		}
		rep.Orphans++
		why := "carries no settle_operation_id"
		switch {
		case o == ops.OutcomeForeignAccount:
			// Nobody else's operation may be explained by it: it is this account's orphan.
			why = fmt.Sprintf("names operation %q, whose tenant's refunds do not go to %s", truncate(rec.OperationID, 80), accountOf(rec))
		case o == ops.OutcomeForeignProvider:
			why = fmt.Sprintf("names operation %q, which is not an operation at %s", truncate(rec.OperationID, 80), rec.Provider)
		case o == ops.OutcomeOtherPayment:
			why = fmt.Sprintf("names operation %q, which refunds another payment than this refund's %s: it is not that operation's refund",
				truncate(rec.OperationID, 80), truncate(rec.PaymentRef, 80))
		case o == ops.OutcomeOtherAmount:
			why = fmt.Sprintf("names operation %q, which refunds another amount or currency: it is not that operation's refund", truncate(rec.OperationID, 80))
		case rec.OperationID != "":
			why = fmt.Sprintf("names operation %q, which Settle does not have", truncate(rec.OperationID, 80))
		}
		return r.record(ctx, rep, Finding{Kind: ExceptionOrphanCharge, Provider: rec.Provider, Ref: rec.Ref,
			ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
			Summary: fmt.Sprintf("%s %s (%s, %s) %s.", rec.Provider, rec.Ref, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status, why),
			Details: details(nil, rec), Actor: r.actor(rec.Provider), At: now})
	case o == "already_closed":
		op := applied.Op
		if op != nil && op.Status == ops.StatusFailed && rec.Charged() {
			rep.ChargedFailed++
			return r.record(ctx, rep, Finding{Kind: ExceptionChargeOnFailed, Provider: rec.Provider, Ref: op.ID,
				TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: []string{rec.Ref}, AmountCents: rec.AmountCents, Currency: rec.Currency,
				Summary: fmt.Sprintf("Operation %s was closed as failed by %s, but %s shows %s (%s, %s).", op.ID, op.ClosedBy,
					rec.Provider, rec.Ref, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status),
				Details: details(op, rec), Actor: r.actor(rec.Provider), At: now})
		}
	case o == "in_flight":
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

// double records the double charge d; again says this run reported it already with fewer
// charges, so the report counts it once.
func (r *Reconciler) double(ctx context.Context, provider string, d DoubleCharge, again bool, rep *Report) error {
	if !again {
		rep.DoubleCharges++
	}
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
	f := Finding{Kind: ExceptionDoubleCharge, Provider: provider, Ref: d.OperationID,
		TenantID: d.TenantID, OperationID: d.OperationID, ChargeRefs: refs, AmountCents: extra, Currency: currency,
		Summary: fmt.Sprintf("Operation %s was charged %d times at %s (%s); %s more than once.", d.OperationID, len(d.Charges),
			provider, strings.Join(refs, ", "), ops.FormatMoney(extra, currency)),
		Details: b, Actor: r.actor(provider), At: r.Ledger.Clock.Now()}
	if again {
		_, _, err := r.Store.RecordFinding(ctx, f)
		return err
	}
	return r.record(ctx, rep, f)
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

// accountOf names the provider account a record comes from.
func accountOf(rec ops.ProviderRecord) string {
	if rec.Account == "" {
		return "the platform account"
	}
	return "account " + rec.Account
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
