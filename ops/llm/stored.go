package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// LLM providers take no idempotency key, so an attempt that timed out may or may not have
// generated (and billed) a completion. A provider that stores completions (OpenAI's
// `store: true`) can tell: Settle tags every attempt with the operation's id in the
// completion's metadata (MetaOperation) and asks the provider for completions carrying it.
// One found is the answer the client never got, and closes the operation as succeeded with
// it; two are a double generation.
//
// The provider account's store is shared by every tenant and by anyone who holds its key, so
// a completion is an operation's only when its metadata names both the operation and its
// tenant (owns), and only Settle writes those keys: a client's own keys with Settle's prefix
// are dropped before any request leaves (SettleKey), whatever Settle knows of the store.

// The metadata keys Settle sets on every stored completion.
const (
	// MetaOperation names the operation an attempt belongs to.
	MetaOperation = "settle_operation_id"
	// MetaTenant names the tenant (its id) whose operation it is.
	MetaTenant = "settle_tenant"
	// MetaPrefix begins every metadata key Settle sets.
	MetaPrefix = "settle_"
)

// SettleKey reports whether a metadata key is one only Settle may send: it begins with
// MetaPrefix, in any case. A client's keys that do are dropped from its request.
func SettleKey(k string) bool {
	return len(k) >= len(MetaPrefix) && strings.EqualFold(k[:len(MetaPrefix)], MetaPrefix)
}

// owns reports whether a stored completion is op's: its metadata names op and op's tenant,
// as Settle tags every attempt it sends. A completion without both proves nothing about op.
func owns(op *ops.Operation, s Stored) bool {
	return s.OperationID == op.ID && s.Tenant == strconv.FormatInt(op.TenantID, 10)
}

// Store says whether a provider keeps the completions Settle sends it, so they can be
// looked up: on, off, or not known yet (the probe could not tell).
type Store int

// The states of a provider's store.
const (
	StoreUnknown Store = iota
	StoreOn
	StoreOff
)

// Stored is one completion a provider keeps.
type Stored struct {
	ID string
	// OperationID and Tenant are read from the completion's metadata.
	OperationID string
	Tenant      string
	// RequestID is the provider's request id, when the stored copy carries it.
	RequestID string
	Created   time.Time
	// Body is the completion as the provider returns it.
	Body json.RawMessage
	// Route is the API it answers: "" for a chat completion, the Responses route for a
	// stored response.
	Route string
	// Status is a stored response's (completed, incomplete, failed, cancelled); a stored
	// completion has none, being always complete.
	Status string
}

// StoredCompletions is a provider's store of completions, as ops/openai reads it.
type StoredCompletions interface {
	// Name is the provider's name as stored on operations.
	Name() string
	// StoreState says whether calls to the provider are stored; it may ask the provider
	// once, and remembers the answer.
	StoreState(ctx context.Context) Store
	// FindStored returns the stored completions whose metadata names the operation.
	FindStored(ctx context.Context, operationID string) ([]Stored, error)
	// GetStored returns one stored completion by id, or an ENOTFOUND error.
	GetStored(ctx context.Context, id string) (*Stored, error)
}

// ResultOf turns a completion the provider stored into the result the gateway stores after
// a call that finished: the completion in the gateway's shape, with its usage and cost, so a
// retry replays it, as JSON or as a stream, exactly as if it had been answered.
func ResultOf(s Stored, prices *PriceTable) (*ops.Result, error) {
	if s.Route == responsesRoute {
		return resultOfResponse(s, prices)
	}
	c, err := parseCompletion(s.Body)
	if err != nil {
		return nil, fmt.Errorf("read stored completion %s: %w", s.ID, err)
	}
	if c.ID != s.ID {
		return nil, fmt.Errorf("stored completion %s carries id %q", s.ID, c.ID)
	}
	c.Object = "chat.completion"
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode stored completion %s: %w", s.ID, err)
	}
	u, _ := parseUsage(c.Usage)
	rec := usageRecord{Usage: u, Model: c.Model, ProviderRequestID: s.RequestID}
	rec.CostMicros, rec.CostKnown = prices.Cost(c.Model, u)
	if rec.CostKnown {
		rec.Currency = prices.Currency
	}
	usage, _ := json.Marshal(rec)
	return &ops.Result{ProviderRef: c.ID, ProviderRequestID: s.RequestID, Body: body, Usage: usage, CostMicros: rec.CostMicros}, nil
}

// Lookups closes llm_call and llm_job operations from the provider's stored completions.
// Every close goes through Ledger.Close, the checked compare-and-set of ops rule 6.
type Lookups struct {
	Ledger *ops.Ledger
	// Events records each completion found as a provider charge, once per completion id.
	Events ops.EventStore
	Store  StoredCompletions
	Prices *PriceTable
	// Refs reads the response ids recorded on attempts; nil reads them through Events.
	Refs AttemptRefReader
}

// Available says why the operation's completions cannot be looked up, or "" when they can.
func (k *Lookups) Available(ctx context.Context, op *ops.Operation) string {
	why, _ := k.availability(ctx, op)
	return why
}

// availability is Available, and whether the reason is only for now: the provider could not
// be asked whether it stores completions.
func (k *Lookups) availability(ctx context.Context, op *ops.Operation) (why string, later bool) {
	if why := NoLookup(op); why != "" {
		return why, false
	}
	switch {
	case k == nil || k.Store == nil:
		return fmt.Sprintf("No LLM provider whose %s Settle reads is configured on this server.", Kept(op)), false
	case k.Store.Name() != op.Provider:
		return fmt.Sprintf("Settle does not call %s any more, so its %s cannot be read.", op.Provider, Kept(op)), false
	case OptedOut(op):
		return "The client sent store: false, so the provider keeps no copy of this call.", false
	case lookupOf(op) == lookupResponseByID:
		return k.responsesAvailable(op), false
	}
	switch k.Store.StoreState(ctx) {
	case StoreOff:
		return fmt.Sprintf("%s does not store completions (SETTLE_LLM_STORE is off, or it refused store), so its calls cannot be looked up.", op.Provider), false
	case StoreUnknown:
		return fmt.Sprintf("%s could not be asked whether it stores completions; try again in a moment.", op.Provider), true
	}
	return "", false
}

// OptedOut reports whether the client of an llm_call asked the provider not to store it
// (store: false), which Settle honours: no lookup can find such a call. The operation keeps
// the opt-out on its row from its opening, so a call whose request the purge deleted is
// still never looked up in the provider's store nor said to be (ops rule 12); one not yet
// opened reads it from the request it stores.
func OptedOut(op *ops.Operation) bool {
	if !Kind().Of(op) {
		return false
	}
	if op.StoreOptedOut {
		return true
	}
	var s struct {
		Body struct {
			Store *bool `json:"store"`
		} `json:"body"`
	}
	return json.Unmarshal(op.Request, &s) == nil && s.Body.Store != nil && !*s.Body.Store
}

// routeOf is the gateway route of the API an llm_call called, as CallOf names it: the
// operation keeps its API past the purge of the request, so a purged call is still looked up
// and spoken of as its API's. Calls that name no API (stored before the gateway served
// other routes) are chat completions.
func routeOf(op *ops.Operation) string {
	if !Kind().Of(op) {
		return chatRoute
	}
	api := CallOf(op).API
	if api == "" {
		return chatRoute
	}
	for _, a := range apis {
		if APIName(a.route()) == api {
			return a.route()
		}
	}
	return "/v1/" + strings.ReplaceAll(api, " ", "/")
}

// Find returns the provider's stored completions of op, oldest first. Completions whose
// metadata does not name op's tenant as well as op are not op's and are left out: they
// neither close op nor count as its generations (ops rules 9 and 12).
func (k *Lookups) Find(ctx context.Context, op *ops.Operation) ([]Stored, error) {
	if lookupOf(op) == lookupResponseByID {
		return k.findResponses(ctx, op)
	}
	found, err := k.Store.FindStored(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("find the stored completions of %s: %w", op.ID, err)
	}
	var out []Stored
	for _, s := range found {
		if owns(op, s) {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Record turns a stored completion into the provider record it is, a billed generation; a
// stored response that ended without an answer is recorded as failed.
func Record(op *ops.Operation, s Stored) ops.ProviderRecord {
	fields := map[string]any{"id": s.ID, "created": s.Created.UTC(), "operation_id": s.OperationID,
		"tenant": s.Tenant, "request_id": s.RequestID}
	status := "succeeded"
	if s.Status != "" {
		fields["status"] = s.Status
	}
	if s.endedWithout() {
		status = "failed"
	}
	raw, _ := json.Marshal(fields)
	return ops.ProviderRecord{Provider: op.Provider, Ref: s.ID, OperationID: op.ID, Status: status, Created: s.Created, Raw: raw}
}

// Close records every completion found as a provider charge and, when nobody is sending
// for op and nobody closed it, closes it as succeeded with the oldest one stored as its
// answer; responses found that all ended without an answer (failed, cancelled) close it as
// failed with the provider's record. kind is the evidence (a lookup from the dashboard, the
// reconciler's). Outcomes are those of ops.Applied: closed, already_closed, in_flight.
func (k *Lookups) Close(ctx context.Context, op *ops.Operation, found []Stored, kind ops.EvidenceKind, actor string) (ops.Applied, error) {
	now := k.Ledger.Clock.Now()
	var answers []Stored
	for _, s := range found {
		if err := k.Events.RecordCharge(ctx, Record(op, s), op.TenantID, now); err != nil {
			return ops.Applied{Op: op, Outcome: "error"}, fmt.Errorf("record %s: %w", Found(op, s.ID), err)
		}
		if s.answered() {
			answers = append(answers, s)
		}
	}
	switch {
	case len(found) == 0:
		return ops.Applied{Op: op}, nil
	case op.Status.Final():
		return ops.Applied{Op: op, Outcome: "already_closed"}, nil
	case op.Leased(now):
		return ops.Applied{Op: op, Outcome: "in_flight"}, nil
	case len(answers) == 0:
		return k.closeEnded(ctx, op, found[0], kind, actor)
	}
	res, ev := k.answerOf(op, answers, kind)
	return k.apply(ctx, op, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Evidence: ev, Actor: actor, Result: res})
}

// answerOf is what closes op as succeeded from the answers the provider holds for it, oldest
// first: the oldest one's text as op's result (nil when it cannot be read) and the evidence
// naming it, which says so when the provider holds more than one.
func (k *Lookups) answerOf(op *ops.Operation, answers []Stored, kind ops.EvidenceKind) (*ops.Result, ops.Evidence) {
	first := answers[0]
	res, rerr := ResultOf(first, k.Prices)
	summary := fmt.Sprintf("%s %s for this operation (created %s).", op.Provider, Found(op, first.ID), first.Created.UTC().Format(time.RFC3339))
	if rerr != nil {
		// The provider made it, so it succeeded; only its text cannot be kept.
		summary += " Its text could not be read, so retries with the key are told the answer is not stored."
		res = nil
	}
	if len(answers) > 1 {
		summary += fmt.Sprintf(" The provider holds %d answers for it: a double generation.", len(answers))
	}
	return res, ops.Evidence{Kind: kind, ProviderRef: first.ID, Summary: summary, Data: Record(op, first).Raw}
}

// apply closes op through the ledger's checked compare-and-set; a close that lost to another
// is already_closed.
func (k *Lookups) apply(ctx context.Context, op *ops.Operation, p ops.CloseParams) (ops.Applied, error) {
	return k.applied(ctx, op, func() (*ops.Operation, error) { return k.Ledger.Close(ctx, p) })
}

// applied is apply with the ledger's close given: Close, or CloseBilled.
func (k *Lookups) applied(ctx context.Context, op *ops.Operation, closeOp func() (*ops.Operation, error)) (ops.Applied, error) {
	out, err := closeOp()
	var e *ops.Error
	if errors.As(err, &e) && e.Closed != nil {
		cur, _ := k.Ledger.Get(ctx, op.ID)
		return ops.Applied{Op: cur, Outcome: "already_closed"}, nil
	}
	if err != nil {
		return ops.Applied{Op: op, Outcome: "error"}, err
	}
	return ops.Applied{Op: out, Outcome: "closed"}, nil
}

// Lookup finds op's stored completions and closes op with them (Close), as a lookup asked
// from the dashboard.
func (k *Lookups) Lookup(ctx context.Context, op *ops.Operation, actor string) (ops.LookupResult, ops.Applied, error) {
	res := ops.LookupResult{OperationID: op.ID, CheckedAt: k.Ledger.Clock.Now()}
	found, err := k.Find(ctx, op)
	if err != nil {
		return res, ops.Applied{Op: op}, err
	}
	for _, s := range found {
		res.Records = append(res.Records, Record(op, s))
	}
	applied, err := k.Close(ctx, op, found, ops.EvidenceLookup, actor)
	return res, applied, err
}

// Fetch returns the stored answer of the completion id a person gave to close op as
// succeeded. Where the provider cannot be asked about op's calls (its API keeps nothing
// Settle reads, no store is configured, the client sent store: false, the provider stores
// no completions) it returns nil and why: nothing can contradict the person's id, so the
// close stands on their word. Where it can, the provider's word decides (ops rule 9): an id
// it does not hold is an ENOTFOUND error (a typo, a made-up id, one from another account),
// a store that cannot be asked now an EUNAVAILABLE one, and a completion whose metadata
// names another tenant or operation, or does not name op and its tenant, is refused: Settle
// tags every chat call it sends while the provider stores completions, so an untagged one
// is some other program's, or one sent before the provider's store was known to be on,
// which nothing ties to this call either. A response is read by its id (fetchResponse).
func (k *Lookups) Fetch(ctx context.Context, op *ops.Operation, id string) (res *ops.Result, why string, err error) {
	if why, later := k.availability(ctx, op); later {
		return nil, "", ops.Errorf(ops.EUNAVAILABLE, "%s", why)
	} else if why != "" {
		return nil, why, nil
	}
	if lookupOf(op) == lookupResponseByID {
		return k.fetchResponse(ctx, op, id)
	}
	s, err := k.Store.GetStored(ctx, id)
	switch {
	case err != nil:
		return nil, "", notHeld(op, id, err)
	case s.Tenant != "" && s.Tenant != strconv.FormatInt(op.TenantID, 10):
		return nil, "", ops.Errorf(ops.EINVALID, "Completion %s belongs to another tenant's call, not to this one.", id)
	case s.OperationID != "" && s.OperationID != op.ID:
		return nil, "", ops.Errorf(ops.EINVALID, "Completion %s belongs to operation %s, not to this one.", id, s.OperationID)
	case !owns(op, *s):
		return nil, "", ops.Errorf(ops.EINVALID, "%s's stored completion %s does not name this operation and its tenant, as Settle tags every call it sends while the provider stores completions: it is not this call's, so nothing was closed.", op.Provider, id)
	}
	res, err = ResultOf(*s, k.Prices)
	if err != nil {
		return nil, fmt.Sprintf("%s's stored completion %s cannot be read.", op.Provider, id), nil
	}
	return res, "", nil
}

// notHeld is the error of a read of the record id that failed: ENOTFOUND when the provider
// holds no such record of op's API, EUNAVAILABLE when it could not be asked.
func notHeld(op *ops.Operation, id string, err error) error {
	if ops.Unreachable(err) {
		return err // Settle's own database, not the provider, could not be read
	}
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		return &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("%s holds no %s.", op.Provider, Found(op, id)), Err: err}
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("%s could not be asked whether it holds %s; try again in a moment.", op.Provider, Found(op, id)), Err: err}
}

// unknownError is the 409 of a key whose operation's outcome is unknown.
func (g *Gateway) unknownError(ctx context.Context, op *ops.Operation) error {
	return &ops.Error{Code: ops.ECONFLICT, Reason: ReasonOutcomeUnknown,
		Message: fmt.Sprintf("The outcome of the first request with this key is unknown (operation %s is %s): the provider may have billed it. %s", op.ID, op.Status, g.whatNext(ctx, op))}
}

// whatNext says what will happen to an operation whose outcome is unknown, and no more
// (ops rule 12): a lookup at the provider is promised only when the provider stores the
// call, and the reconciler only when one runs.
func (g *Gateway) whatNext(ctx context.Context, op *ops.Operation) string {
	lookups := &Lookups{Store: g.cfg.Stored}
	// A response is looked up by the id recorded on its attempt, which the store that
	// records those ids also reads back.
	lookups.Refs, _ = g.cfg.Refs.(AttemptRefReader)
	if why := lookups.Available(context.WithoutCancel(ctx), op); why != "" {
		return fmt.Sprintf("Nothing more is sent for this key until a person settles operation %s by hand: %s", op.ID, why)
	}
	if g.cfg.Reconciled {
		return fmt.Sprintf("Nothing more is sent for this key: the reconciler looks this one up in %s's %s and settles it; a retry with this key then gets the answer found.", op.Provider, Kept(op))
	}
	return fmt.Sprintf("Nothing more is sent for this key until an on-call person looks it up in %s's %s, or settles it by hand; a retry with this key then gets the answer found.", op.Provider, Kept(op))
}
