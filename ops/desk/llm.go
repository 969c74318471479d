package desk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/recon"
)

// CanLookUp says whether a lookup at the provider exists for op, and if not, why.
func (d *Desk) CanLookUp(ctx context.Context, op *ops.Operation) (bool, string) {
	switch d.Ledger.Kind(op.Kind).Lookup {
	case ops.LookupPaymentRecords:
		return true, ""
	case ops.LookupNone:
		return false, fmt.Sprintf("No lookup exists for %s operations.", op.Kind)
	}
	if why := llm.NoLookup(op); why != "" {
		return false, why
	}
	if why := d.Completions.Available(ctx, op); why != "" {
		return false, why
	}
	return true, ""
}

// lookupLLM looks an llm_call or llm_job operation up at its provider, as its API allows: a
// chat completion in the provider's stored completions, a response by the id recorded on its
// attempts. One found closes it as succeeded with the answer stored, so the client's retry
// with its key replays it and a job goes on from its generation; a response that failed or
// was cancelled closes it as failed; two or more answers are a double generation, raised as
// an exception.
func (d *Desk) lookupLLM(ctx context.Context, op *ops.Operation, actor string) (LookupOutcome, error) {
	now := d.Ledger.Clock.Now()
	out := LookupOutcome{OperationID: op.ID, Op: op}
	byHand := llm.ByHand(op)
	// What the call's API allows comes first: a message or an embeddings call has nothing
	// to look up, whatever provider of stored completions the server has.
	if why := llm.NoLookup(op); why != "" {
		out.Outcome, out.Message = LookupUnsupported, why+byHand
		return out, nil
	}
	switch {
	case d.Completions == nil || d.Completions.Store == nil:
		out.Outcome, out.Message = LookupUnsupported, fmt.Sprintf("No LLM provider whose %s Settle reads is configured on this server.", llm.Kept(op))+byHand
		return out, nil
	case d.Completions.StoreUnknown(ctx, op):
		out.Outcome, out.Message = LookupUnavailable, fmt.Sprintf("%s could not be asked whether it stores completions; try again in a moment.", op.Provider)
		return out, nil
	}
	if why := d.Completions.Available(ctx, op); why != "" {
		out.Outcome, out.Message = LookupUnsupported, why+byHand
		return out, nil
	}
	if op.Leased(now) {
		out.Outcome = LookupInFlight
		out.Message = fmt.Sprintf("A worker is sending it until %s; look again once the lease has ended.", op.LeaseUntil.UTC().Format(time.RFC3339))
		return out, nil
	}
	res, applied, err := d.Completions.Lookup(ctx, op, actor)
	if ended, err := lookupEnded(&out, res, applied, err); ended {
		return out, err
	}
	switch {
	case !res.Found():
		out.Outcome = LookupNotFound
		out.Message = llm.NotFound(op) + byHand
		return out, nil
	}
	d.describeLLM(&out, applied, len(res.Records))
	if len(res.Records) > 1 {
		return out, d.recordDouble(ctx, op, res, actor, &out)
	}
	return out, nil
}

// describeLLM says what applying the completions found did.
func (d *Desk) describeLLM(out *LookupOutcome, applied ops.Applied, found int) {
	switch applied.Outcome {
	case "closed":
		out.Outcome = LookupClosed
		next := "a retry with the client's key now replays it."
		if d.Ledger.Kind(applied.Op.Kind).Jobs {
			next = "the job goes on from its generation."
		}
		switch {
		case applied.Op.PurgedAt != nil:
			next = "its text is not kept: the key's TTL and SETTLE_LLM_BODY_KEEP have passed, and this call's prompt and answer were deleted."
		case len(applied.Op.Result) == 0:
			next = "its text could not be read, so a retry with the client's key is told to ask again with a new key."
		}
		out.Message = fmt.Sprintf("Closed as succeeded: %s %s for it; %s", applied.Op.Provider, llm.Found(applied.Op, applied.Op.ProviderRef), next)
		if applied.Op.Status == ops.StatusFailed {
			out.Message = fmt.Sprintf("Closed as failed: %s's record of %s says it ended without an answer; a retry with the client's key is told it failed.",
				applied.Op.Provider, llm.Found(applied.Op, applied.Op.ProviderRef))
		}
	case "already_closed":
		out.Outcome, out.Message = LookupAlreadyClosed, ops.AlreadyClosed(applied.Op).Message
	case "in_flight":
		out.Outcome, out.Message = LookupInFlight, "A worker started sending it meanwhile; look again once its lease has ended."
	default:
		out.Outcome, out.Message = LookupFailed, "What the provider holds for it could not be applied."
	}
}

// recordDouble raises the double generation the lookup found as an exception.
func (d *Desk) recordDouble(ctx context.Context, op *ops.Operation, res ops.LookupResult, actor string, out *LookupOutcome) error {
	out.Message += fmt.Sprintf(" %s holds %d answers for this one operation: a double generation", op.Provider, len(res.Records))
	if d.Findings == nil {
		out.Message += " to report."
		return nil
	}
	refs := make([]string, len(res.Records))
	for i, r := range res.Records {
		refs[i] = r.Ref
	}
	if _, _, err := recon.RecordDoubles(ctx, d.Findings, op.Provider, refs, actor, d.Ledger.Clock.Now()); err != nil {
		out.Message += "; recording it as an exception failed."
		return err
	}
	out.Message += ", recorded as an exception."
	return nil
}

// answerFor fetches the provider's answer of the record a person closes an LLM operation
// with (a completion, a response), so the client's key replays it. Nil with a reason when
// the provider cannot be asked about the call (its API keeps nothing Settle can read, the
// client sent store: false, no provider that keeps it is configured): the close stands on
// the person's word, and the key then answers answer_not_stored. When the provider can be
// asked, its word decides (ops rule 9): an id it does not hold, or holds as another call's,
// is refused, and a store that cannot be asked now refuses the close for now.
func (d *Desk) answerFor(ctx context.Context, op *ops.Operation, ref string) (*ops.Result, string, error) {
	if why := llm.NoLookup(op); why != "" {
		return nil, why, nil
	}
	if d.Completions == nil || d.Completions.Store == nil {
		return nil, fmt.Sprintf("No LLM provider whose %s Settle reads is configured on this server.", llm.Kept(op)), nil
	}
	res, why, err := d.Completions.Fetch(ctx, op, ref)
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		return nil, "", d.notHeld(ctx, op, err)
	}
	return res, why, err
}

// recentCall is how long after a call was last sent a record the provider does not show yet
// may still appear: a provider lists a stored completion a little after it billed it, as a
// lookup that finds nothing says too.
const recentCall = 15 * time.Minute

// notHeld refuses a close as succeeded with a record id the provider does not hold: a typo
// or a made-up id would show op as succeeded on the person's word alone (ops rule 9). Right
// after the call, the id may be right and the provider's copy not listed yet, so the
// sentence says to try again then rather than only that the id is wrong (ops rule 12).
func (d *Desk) notHeld(ctx context.Context, op *ops.Operation, err error) error {
	msg := fmt.Sprintf("%s; check the id (%s): a close as succeeded needs the provider's own record of this call, so nothing was closed.",
		strings.TrimSuffix(ops.ErrorMessage(err), "."), d.Ledger.Kind(op.Kind).RecordOf(op).Hint)
	if at, ok := d.lastSent(ctx, op); ok && llm.ListedLate(op) && d.Ledger.Clock.Now().Sub(at) < recentCall {
		msg += fmt.Sprintf(" This call was last sent at %s, less than %d minutes ago, and a provider lists a stored completion only a little after it billed it: if the id is right, try again in a few minutes.",
			at.UTC().Format(time.RFC3339), int(recentCall.Minutes()))
	}
	return &ops.Error{Code: ops.EINVALID, Message: msg, Err: err}
}

// lastSent is when op's last attempt started or ended, whichever is later; false when its
// attempts cannot be read or it has none.
func (d *Desk) lastSent(ctx context.Context, op *ops.Operation) (time.Time, bool) {
	attempts, err := d.Ledger.Attempts(ctx, op.ID)
	if err != nil {
		return time.Time{}, false
	}
	var last time.Time
	for _, a := range attempts {
		if a.StartedAt.After(last) {
			last = a.StartedAt
		}
		if a.FinishedAt != nil && a.FinishedAt.After(last) {
			last = *a.FinishedAt
		}
	}
	return last, !last.IsZero()
}
