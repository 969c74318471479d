package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// StoredLookups is a UsageSource that can also read the provider's stored completions
// (ops/openai's UsageReader with its Lookups set). Before comparing usage, the reconciler
// then closes the provider's unknown LLM operations from the completions found, so the
// generations they explain count as answered.
type StoredLookups interface {
	StoredLookups() *llm.Lookups
}

// LookupGrace is how long an LLM operation stays unknown before the reconciler looks it up:
// a provider may show a stored completion only some time after it billed it, and a person
// looking at it first should not race the reconciler.
const LookupGrace = 2 * time.Minute

// reconcileStored looks each LLM operation of the provider that is unknown since before
// the grace up in its stored completions: one found closes it as succeeded with its answer
// (a retry of the key then replays it), two or more are a double generation. Operations
// not found stay for a person.
func (r *Reconciler) reconcileStored(ctx context.Context, k *llm.Lookups, provider string, rep *Report) error {
	if k == nil || k.Store == nil {
		return nil
	}
	now := r.Ledger.Clock.Now()
	cands, err := r.Store.UnknownLLM(ctx, provider, now.Add(-LookupGrace), orDefault(r.MissingBatch, DefaultMissingBatch))
	if err != nil {
		return err
	}
	var refs []string
	for _, op := range cands {
		// Only a call its API lets the provider be asked about is looked up (a stored chat
		// completion by Settle's metadata, a response by the id recorded on its attempt): an
		// embeddings call is found nowhere, and counts as looked up nowhere.
		if k.Available(ctx, op) != "" {
			continue
		}
		found, err := k.Find(ctx, op)
		if err != nil {
			return err
		}
		rep.Looked++
		for _, s := range found {
			refs = append(refs, s.ID)
		}
		if err := r.closeStored(ctx, k, op, found, rep); err != nil {
			return err
		}
	}
	n, created, err := RecordDoubles(ctx, r.Store, provider, refs, r.actor(provider), r.Ledger.Clock.Now())
	rep.DoubleCharges += n
	rep.NewExceptions += created
	return err
}

// closeStored closes one operation from the completions found for it, through the ledger,
// and records what the reconciler did as a resolved exception.
func (r *Reconciler) closeStored(ctx context.Context, k *llm.Lookups, op *ops.Operation, found []llm.Stored, rep *Report) error {
	if len(found) == 0 {
		return nil
	}
	actor := r.actor(op.Provider)
	applied, err := k.Close(ctx, op, found, ops.EvidenceReconciliation, actor)
	if code := ops.ErrorCode(err); code == ops.EINVALID || code == ops.ECONFLICT {
		r.logger().Warn("reconciliation could not close an LLM operation", "operation_id", op.ID, "err", err)
		rep.Refused++
		return nil
	} else if err != nil {
		return err
	}
	switch applied.Outcome {
	case "in_flight":
		rep.InFlight++
	case "closed":
		rep.Closed++
		first := found[0]
		note := fmt.Sprintf("Closed as succeeded by reconciliation with %s as evidence; its answer is stored for the retries.", first.ID)
		if applied.Op != nil && applied.Op.Status == ops.StatusFailed {
			note = fmt.Sprintf("Closed as failed by reconciliation: the provider's record %s says it ended without an answer.", first.ID)
		}
		return r.record(ctx, rep, Finding{Kind: ExceptionExplainedUnknown, Provider: op.Provider, Ref: op.ID,
			TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: storedIDs(found),
			Summary:  fmt.Sprintf("Operation %s (%s) had no known outcome; %s %s for it.", op.ID, op.Kind, op.Provider, llm.Found(op, first.ID)),
			Resolved: true, Note: note, Details: llm.Record(op, first).Raw, Actor: actor, At: r.Ledger.Clock.Now()})
	}
	return nil
}

func storedIDs(found []llm.Stored) []string {
	ids := make([]string, len(found))
	for i, s := range found {
		ids[i] = s.ID
	}
	return ids
}

// DoubleStore is what RecordDoubles needs: the ledger's provider charges and the exception
// queue.
type DoubleStore interface {
	DoubleCharges(ctx context.Context, provider string, refs []string) ([]DoubleCharge, error)
	RecordFinding(ctx context.Context, f Finding) (ex *Exception, created bool, err error)
}

// RecordDoubles raises a double_charge exception, once, for each operation among those the
// charges refs belong to that holds more than one charge: two refunds, or two billed
// generations of one LLM call. It returns how many such operations it saw and how many of
// their exceptions are new.
func RecordDoubles(ctx context.Context, s DoubleStore, provider string, refs []string, actor string, at time.Time) (doubles, created int, err error) {
	ds, err := s.DoubleCharges(ctx, provider, refs)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range ds {
		var ids []string
		var extra int64
		for i, c := range d.Charges {
			ids = append(ids, c.Ref)
			if i > 0 {
				extra += c.AmountCents
			}
		}
		b, _ := json.Marshal(map[string]any{"operation_id": d.OperationID, "charges": d.Charges})
		_, isNew, err := s.RecordFinding(ctx, Finding{Kind: ExceptionDoubleCharge, Provider: provider, Ref: d.OperationID,
			TenantID: d.TenantID, OperationID: d.OperationID, ChargeRefs: ids, AmountCents: extra, Currency: d.Charges[0].Currency,
			Summary: fmt.Sprintf("Operation %s was charged %d times at %s (%s): one intent, more than one side effect.",
				d.OperationID, len(d.Charges), provider, strings.Join(ids, ", ")),
			Details: b, Actor: actor, At: at})
		if err != nil {
			return doubles, created, fmt.Errorf("record double charge of %s: %w", d.OperationID, err)
		}
		doubles++
		if isNew {
			created++
		}
	}
	return doubles, created, nil
}
