package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/settle-dev/settle/ops"
)

// What a lookup at the provider can do differs per API, and each api says it (lookedUp):
// chat completions are found in the provider's stored completions by the metadata Settle tags
// every attempt with; a response is read by the id the provider gave it in its first event,
// which the gateway records on the attempt at once; embeddings and Anthropic's messages have
// nothing to look up, and only the provider's usage report shows them.

// lookupWay is what a lookup at the provider can do for the calls of one API.
type lookupWay int

const (
	// lookupUsageOnly: the provider keeps nothing to read; only its usage report shows the call.
	lookupUsageOnly lookupWay = iota
	// lookupStoredCompletion: the provider's stored completions, found by Settle's metadata.
	lookupStoredCompletion
	// lookupResponseByID: the provider's stored response, read by the id recorded on the attempt.
	lookupResponseByID
)

// lookedUp is an api whose calls a lookup at the provider can find; an api that is not one
// has nothing to look up (lookupUsageOnly).
type lookedUp interface {
	lookup() lookupWay
}

func (chatAPI) lookup() lookupWay      { return lookupStoredCompletion }
func (responsesAPI) lookup() lookupWay { return lookupResponseByID }

// lookupOf is what a lookup can do for op's API; jobs' generations are chat completions.
func lookupOf(op *ops.Operation) lookupWay {
	a, err := apiFor(routeOf(op))
	if err != nil {
		return lookupUsageOnly
	}
	if l, ok := a.(lookedUp); ok {
		return l.lookup()
	}
	return lookupUsageOnly
}

// StoredResponses is a provider's store of responses, as ops/openai reads it: a response is
// read by its id, never searched for.
type StoredResponses interface {
	// GetResponse returns the stored response id as it is now (Stored.Status says whether it
	// completed), or an ENOTFOUND error when the provider holds none (yet).
	GetResponse(ctx context.Context, id string) (*Stored, error)
}

// AttemptRefReader reads the provider's ids recorded on an operation's attempts, by attempt
// number (ops/pg). The Lookups' Events implements it where responses are looked up.
type AttemptRefReader interface {
	AttemptRefs(ctx context.Context, opID string) (map[int]string, error)
}

// The statuses of a stored response that end it: completed and incomplete ones were
// generated and are answers; failed and cancelled ones ended without one.
const (
	responseCompleted  = "completed"
	responseIncomplete = "incomplete"
	responseFailed     = "failed"
	responseCancelled  = "cancelled"
)

// answered reports whether a stored completion or response is an answer the client can be
// given: every stored completion is, a response once it completed.
func (s Stored) answered() bool {
	return s.Route != responsesRoute || s.Status == responseCompleted || s.Status == responseIncomplete
}

// endedWithout reports whether a stored response ended without an answer: the provider says
// the generation failed or was cancelled.
func (s Stored) endedWithout() bool {
	return s.Route == responsesRoute && (s.Status == responseFailed || s.Status == responseCancelled)
}

// responsesAvailable says why op's responses cannot be read by id, or "".
func (k *Lookups) responsesAvailable(op *ops.Operation) string {
	if _, ok := k.Store.(StoredResponses); !ok {
		return fmt.Sprintf("%s's stored responses cannot be read from this server.", op.Provider)
	}
	if k.refs() == nil {
		return "The response ids Settle recorded on this call's attempts cannot be read on this server."
	}
	return ""
}

// refs is what reads the response ids recorded on attempts: Refs, or Events when it can.
func (k *Lookups) refs() AttemptRefReader {
	if k.Refs != nil {
		return k.Refs
	}
	r, _ := k.Events.(AttemptRefReader)
	return r
}

// findResponses reads, by the id recorded on each of op's attempts, the responses the
// provider stored for them, oldest first, keeping those that ended (completed, incomplete,
// failed or cancelled): a response not stored (yet) or still in progress tells nothing now.
// The id Settle recorded from the provider's own answer is the proof a response is op's; one
// whose metadata names another operation or tenant is left out all the same.
func (k *Lookups) findResponses(ctx context.Context, op *ops.Operation) ([]Stored, error) {
	refs, err := k.refs().AttemptRefs(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("read the response ids of %s: %w", op.ID, err)
	}
	ns := make([]int, 0, len(refs))
	for n := range refs {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var out []Stored
	seen := map[string]bool{}
	for _, n := range ns {
		id := refs[n]
		if seen[id] {
			continue
		}
		seen[id] = true
		s, err := k.Store.(StoredResponses).GetResponse(ctx, id)
		if ops.ErrorCode(err) == ops.ENOTFOUND {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read response %s of %s: %w", id, op.ID, err)
		}
		if s.ID != id || (s.OperationID != "" && s.OperationID != op.ID) ||
			(s.Tenant != "" && s.Tenant != strconv.FormatInt(op.TenantID, 10)) {
			continue
		}
		if s.answered() || s.endedWithout() {
			out = append(out, *s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// resultOfResponse turns a completed stored response into the result the gateway stores
// after a call that finished, as ResultOf does for a completion.
func resultOfResponse(s Stored, prices *PriceTable) (*ops.Result, error) {
	a, err := parseResponse(s.Body)
	if err != nil {
		return nil, fmt.Errorf("read stored response %s: %w", s.ID, err)
	}
	if a.id != s.ID {
		return nil, fmt.Errorf("stored response %s carries id %q", s.ID, a.id)
	}
	rec := usageRecord{Usage: a.usage, Model: a.model, ProviderRequestID: s.RequestID}
	rec.CostMicros, rec.CostKnown = prices.Cost(a.model, a.usage)
	if rec.CostKnown {
		rec.Currency = prices.Currency
	}
	usage, _ := json.Marshal(rec)
	return &ops.Result{ProviderRef: a.id, ProviderRequestID: s.RequestID, Body: a.body, Usage: usage, CostMicros: rec.CostMicros}, nil
}

// closeEnded closes op as failed from the provider's record of a response that ended without
// an answer (failed or cancelled), when nobody is sending for op and nobody closed it. The
// response is the provider's object for op, billed or not, so the close names it as op's
// provider reference as well as in its evidence: the operation's page and the reconciler
// read it there (ops rule 9). What the provider billed for it, as the response's usage
// reports it, is the operation's cost: a response cancelled or failed part-way was billed for
// what it read and generated; one cancelled before it left the queue, for nothing.
func (k *Lookups) closeEnded(ctx context.Context, op *ops.Operation, s Stored, kind ops.EvidenceKind, actor string) (ops.Applied, error) {
	summary := fmt.Sprintf("%s's stored response %s for this operation %s (created %s): nothing was answered.",
		op.Provider, s.ID, s.Status, s.Created.UTC().Format("2006-01-02T15:04:05Z07:00"))
	billed, ok := billedOf(s, k.Prices)
	if ok {
		summary += " The provider billed what it used before it ended; that is this operation's cost."
	}
	ev := ops.Evidence{Kind: kind, ProviderRef: s.ID, Summary: summary, Data: Record(op, s).Raw}
	p := ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed, Evidence: ev, Actor: actor}
	return k.applied(ctx, op, func() (*ops.Operation, error) { return k.Ledger.CloseBilled(ctx, p, billed) })
}

// billedOf is the provider's record of a stored response that ended without an answer, with
// what the provider billed for it as its usage reports it; ok is false when it reports none
// (a response cancelled before it left the queue), and the record then bills nothing.
func billedOf(s Stored, prices *PriceTable) (res ops.Result, ok bool) {
	res = ops.Result{ProviderRef: s.ID, ProviderRequestID: s.RequestID}
	a, _, err := readResponse(s.Body)
	if err != nil || a.id != s.ID || a.usage == (Usage{}) {
		return res, false
	}
	rec := usageRecord{Usage: a.usage, Model: a.model, ProviderRequestID: s.RequestID}
	rec.CostMicros, rec.CostKnown = prices.Cost(a.model, a.usage)
	if rec.CostKnown {
		rec.Currency = prices.Currency
	}
	res.Usage, _ = json.Marshal(rec)
	res.CostMicros = rec.CostMicros
	return res, true
}

// What a lookup finds, in words, per API.
func lookupNoun(op *ops.Operation) string {
	if lookupOf(op) == lookupResponseByID {
		return "stored response"
	}
	return "stored completion"
}

// NotFound says what a lookup that found nothing for op means, and what is left to do.
func NotFound(op *ops.Operation) string {
	if lookupOf(op) == lookupResponseByID {
		return fmt.Sprintf("%s holds no finished response under the ids recorded on this call's attempts: either none was stored yet, it is still in progress, or the attempt never got as far as its first event (then no id was recorded, and only the provider's usage report can tell).", op.Provider)
	}
	return fmt.Sprintf("%s has no stored completion carrying this operation's id. A provider may show one a little after it billed it, so look again in a few minutes; if none appears, the send most likely never generated, but only the provider's usage report can tell.", op.Provider)
}

// ListedLate reports whether the provider may show op's record only a little after it
// billed it: a stored completion is listed and read some time after its call, while a
// response is kept under the id it was given at its start.
func ListedLate(op *ops.Operation) bool { return lookupOf(op) == lookupStoredCompletion }

// ByHand says how a person closes op by hand when no lookup settles it, as its API allows,
// with a space before it.
func ByHand(op *ops.Operation) string { return " " + wordsOf(op).byHand(op.Provider) }

// Found says what one record a lookup found for op is, as "stored completion chatcmpl-…".
func Found(op *ops.Operation, ref string) string { return lookupNoun(op) + " " + ref }

// StoreUnknown reports whether op's lookup waits on knowing whether the provider stores
// completions at all (chat completions only; a response is read by its id). A call whose
// client sent store: false waits on nothing: the provider keeps no copy of it either way,
// so the provider is not asked, and the person is told why there is no lookup rather than
// to try again.
func (k *Lookups) StoreUnknown(ctx context.Context, op *ops.Operation) bool {
	return lookupOf(op) == lookupStoredCompletion && !OptedOut(op) && k != nil && k.Store != nil && k.Store.StoreState(ctx) == StoreUnknown
}

// fetchResponse is Fetch for a response: its text is taken as op's answer only when the id
// is one Settle recorded on op's attempts and the provider holds it finished with an answer.
// One the provider holds as failed or cancelled is refused: it is the provider's record
// that nothing was answered; so is an id it does not hold at all (ENOTFOUND), and one it
// holds still queued or in progress: its own record says there is no answer yet, and the
// generation may still fail or be cancelled. One it holds finished that was not recorded on
// op's attempts (an attempt that never got as far as its first event records no id) gives
// no answer: responses carry no tag of Settle's, so nothing ties its text to this call, and
// the close stands on the person's word.
func (k *Lookups) fetchResponse(ctx context.Context, op *ops.Operation, id string) (*ops.Result, string, error) {
	refs, err := k.refs().AttemptRefs(ctx, op.ID)
	if err != nil {
		return nil, "", attemptsUnread(op, id, err)
	}
	recorded := false
	for _, ref := range refs {
		recorded = recorded || ref == id
	}
	s, err := k.Store.(StoredResponses).GetResponse(ctx, id)
	switch {
	case err != nil:
		return nil, "", notHeld(op, id, err)
	case s.OperationID != "" && s.OperationID != op.ID, s.Tenant != "" && s.Tenant != strconv.FormatInt(op.TenantID, 10):
		return nil, "", ops.Errorf(ops.EINVALID, "Response %s belongs to another call, not to this one.", id)
	}
	if err := endedWithout(op, *s, recorded); err != nil {
		return nil, "", err
	}
	if !s.answered() {
		return nil, "", stillRunning(op, *s, recorded)
	}
	if !recorded {
		return nil, fmt.Sprintf("%s holds response %s, but not under an id recorded on this call's attempts, so its text is not taken as this call's answer.", op.Provider, id), nil
	}
	res, err := ResultOf(*s, k.Prices)
	if err != nil {
		return nil, fmt.Sprintf("%s's stored response %s cannot be read.", op.Provider, id), nil
	}
	return res, "", nil
}

// attemptsUnread is the error of a close with response id when Settle's own record of op's
// attempts could not be read: an outage of the database stays one (try again once it is
// back); any other failure is Settle's, not the provider's, so the sentence says so rather
// than that the provider could not be asked.
func attemptsUnread(op *ops.Operation, id string, err error) error {
	if ops.Unreachable(err) {
		return err
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Err: err, Message: fmt.Sprintf(
		"Settle could not read its own record of this call's attempts, so it cannot tell whether response %s is one of them, and %s was not asked; nothing was closed. Try again in a moment; if this keeps happening, Settle's database needs looking at.",
		id, op.Provider)}
}

// stillRunning refuses a close as succeeded with a response the provider holds as queued
// or in progress: its own record says there is no answer yet, and the generation may still
// fail or be cancelled, so a close as succeeded would contradict it (ops rule 9) and tell
// the client's retry of an answer that may never come. A response recorded on op's attempts
// is one its lookup reads, so the person is sent to it once the response has ended.
func stillRunning(op *ops.Operation, s Stored, recorded bool) error {
	next := "Wait until it has ended, then close the call again."
	if recorded {
		next = fmt.Sprintf("Wait until it has ended, then look the call up: the lookup closes it with the provider's record, as succeeded with its answer or as failed. To stop it instead, cancel it (the client's POST /v1/responses/%s/cancel, or the provider's console); the lookup then closes the call as failed.", s.ID)
	}
	return ops.Errorf(ops.EINVALID, "%s holds response %s as %s: it is still generating and has no answer yet, so it cannot close this call as succeeded, and nothing was closed. %s",
		op.Provider, s.ID, s.Status, next)
}

// endedWithout refuses a close as succeeded with a response the provider holds as failed or
// cancelled: a close as succeeded would stand on a person's word against the provider's own
// record that nothing was answered (ops rule 9). Only a response recorded on op's attempts
// is one its lookup reads, so only then is the person sent to it.
func endedWithout(op *ops.Operation, s Stored, recorded bool) error {
	if !s.endedWithout() {
		return nil
	}
	next := ""
	if recorded {
		next = " Look the call up: the lookup closes it as failed with the provider's record."
	}
	return ops.Errorf(ops.EINVALID, "%s holds response %s as %s: it ended without an answer, so it cannot close this call as succeeded.%s",
		op.Provider, s.ID, s.Status, next)
}

// ResponsesRoute is the gateway's route of OpenAI's Responses API, as a stored response
// found by a lookup names its API (Stored.Route).
const ResponsesRoute = responsesRoute
