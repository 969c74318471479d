package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ProviderRecord is a side effect as the provider reports it: a Stripe refund object, a
// billed LLM request. OperationID is ours, read back from the provider's metadata.
type ProviderRecord struct {
	Provider    string
	Ref         string
	OperationID string
	AmountCents int64
	Currency    string
	// Status is the provider's word: succeeded, pending, failed, canceled...
	Status  string
	Created time.Time
	Raw     json.RawMessage
	// Account is the provider account the record was read from or pushed by: a Stripe
	// connected account (acct_…), "" for the provider's own (platform) account. A record may
	// explain only an operation of the tenant whose calls go to that account.
	Account string
	// PaymentRef is the payment the side effect moved money back to (a Stripe refund's
	// payment intent), "" when the provider names none: a record may explain only an
	// operation of that payment.
	PaymentRef string
}

// Charged reports whether the record is a side effect that happened (or is happening).
func (r ProviderRecord) Charged() bool {
	return r.Status == "succeeded" || r.Status == "pending" || r.Status == "requires_action"
}

// LookupResult is what a lookup at the provider found for one operation.
type LookupResult struct {
	OperationID string
	// Records are the provider's records carrying our operation id. More than one is a
	// double charge (rule 3).
	Records   []ProviderRecord
	CheckedAt time.Time
}

// Found reports whether the provider holds a record for the operation.
func (r LookupResult) Found() bool { return len(r.Records) > 0 }

// ProviderEvent is one event the provider pushed to us (a webhook).
type ProviderEvent struct {
	Provider   string
	ID         string
	Type       string
	Record     *ProviderRecord
	Payload    json.RawMessage
	ReceivedAt time.Time
	// Account is the provider account the event comes from, "" for the platform account
	// (see ProviderRecord.Account).
	Account string
}

// EventStore remembers provider events and charges so each is applied once.
type EventStore interface {
	// EventSeen reports whether the event was recorded already.
	EventSeen(ctx context.Context, provider, id string) (bool, error)
	// RecordEvent records the event and what came of it; a repeat changes nothing.
	RecordEvent(ctx context.Context, e ProviderEvent, operationID, outcome string) error
	// RecordCharge records a provider charge once per provider reference.
	RecordCharge(ctx context.Context, r ProviderRecord, tenantID int64, seenAt time.Time) error
	// RecordFailedAfterSuccess raises a reconciliation exception for an operation whose
	// provider record failed after it had succeeded (a pending refund the bank refused).
	RecordFailedAfterSuccess(ctx context.Context, op *Operation, r ProviderRecord, at time.Time) error
	// ProviderAccount returns the account at provider that a tenant's calls go to, "" for the
	// provider's own account: a record from any other account never changes its operations.
	ProviderAccount(ctx context.Context, tenantID int64, provider string) (string, error)
	// RecordOwner returns the operation other than except that a provider's record belongs
	// to as Settle has seen it (a charge recorded from a lookup, webhook or reconciliation
	// naming the operation, or an attempt that got the record back), or "" when Settle
	// knows of none.
	RecordOwner(ctx context.Context, provider, ref, except string) (string, error)
}

// Applied says what applying a provider record did.
type Applied struct {
	Op *Operation
	// Outcome: closed, already_closed, in_flight, orphan, not_charged, foreign_account,
	// foreign_provider, other_amount, other_payment.
	Outcome string
}

// OutcomeForeignAccount is the outcome of a record that names an operation of a tenant
// whose calls go to another provider account than the record's: it changes nothing.
const OutcomeForeignAccount = "foreign_account"

// OutcomeForeignProvider is the outcome of a record that names an operation sent to
// another provider than the record's (a Stripe refund naming an LLM call): it changes
// nothing.
const OutcomeForeignProvider = "foreign_provider"

// OutcomeOtherAmount is the outcome of a record that names an operation with an amount
// whose amount or currency is not the operation's (a refund made by hand with Settle's
// metadata copied onto it): it is not that operation's record and changes nothing.
const OutcomeOtherAmount = "other_amount"

// OutcomeOtherPayment is the outcome of a record that names an operation refunding one
// payment but moved money back to another (a refund of another customer's order made by
// hand with Settle's metadata copied onto it): it is not that operation's record and changes
// nothing.
const OutcomeOtherPayment = "other_payment"

// NotItsRecord reports whether outcome is ApplyRecord's for a record that names an operation
// but cannot be its own (another provider, account, payment, amount or currency): it was
// recorded tied to no operation and changed nothing. Every path that tells a person or a
// report about such a record asks this, so an outcome added here reaches all of them.
func NotItsRecord(outcome string) bool {
	switch outcome {
	case OutcomeForeignProvider, OutcomeForeignAccount, OutcomeOtherPayment, OutcomeOtherAmount:
		return true
	}
	return false
}

// ApplyRecord records a provider record and, when it explains an operation nobody is
// sending for (unknown, expired, stalled), closes that operation with ev as evidence through
// the same compare-and-set as a person would. Replays are harmless. A record from another
// provider account than the one the operation was sent to, from another provider than the
// operation's, of another payment than the operation's, or of another amount or currency
// than the operation's, is recorded tied to no operation and changes nothing
// (OutcomeForeignAccount, OutcomeForeignProvider, OutcomeOtherPayment, OutcomeOtherAmount),
// on every path: webhooks, lookups and reconciliation.
func (l *Ledger) ApplyRecord(ctx context.Context, es EventStore, rec ProviderRecord, ev Evidence, actor string) (Applied, error) {
	now := l.Clock.Now()
	var op *Operation
	if rec.OperationID != "" {
		var err error
		op, err = l.Get(ctx, rec.OperationID)
		if err != nil && ErrorCode(err) != ENOTFOUND {
			return Applied{}, err
		}
	}
	if op != nil {
		foreign, err := foreignRecord(ctx, es, op, rec)
		if err != nil {
			return Applied{}, err
		}
		if foreign != "" {
			// Recorded as the provider's, tied to no operation of ours: whoever can write
			// metadata in one account must not close, fail or double-charge an operation
			// of a tenant whose money is in another, nor one another provider ran.
			rec.OperationID = ""
			if err := es.RecordCharge(ctx, rec, 0, now); err != nil {
				return Applied{}, fmt.Errorf("record charge: %w", err)
			}
			return Applied{Outcome: foreign}, nil
		}
	}
	tenant := int64(0)
	if op != nil {
		tenant = op.TenantID
	}
	if err := es.RecordCharge(ctx, rec, tenant, now); err != nil {
		return Applied{}, fmt.Errorf("record charge: %w", err)
	}
	if op == nil {
		return Applied{Outcome: "orphan"}, nil
	}
	if op.Status == StatusSucceeded && rec.Ref == op.ProviderRef && !rec.Charged() {
		return l.failAfterSuccess(ctx, es, op, rec, ev, actor)
	}
	if op.Status.Final() {
		return Applied{Op: op, Outcome: "already_closed"}, nil
	}
	if op.Leased(now) {
		return Applied{Op: op, Outcome: "in_flight"}, nil
	}
	to := StatusSucceeded
	if !rec.Charged() {
		to = StatusFailed
	}
	ev.ProviderRef = rec.Ref
	if len(ev.Data) == 0 {
		ev.Data = rec.Raw
	}
	out, err := l.Close(ctx, CloseParams{ID: op.ID, Version: op.Version, To: to, Evidence: ev, Actor: actor})
	if a, ok := l.overtaken(ctx, op, rec, err); ok {
		return a, nil
	}
	if err != nil {
		return Applied{Op: op, Outcome: "error"}, err
	}
	return Applied{Op: out, Outcome: "closed"}, nil
}

// overtaken says what a record's close that lost its compare-and-set (rule 6) found instead:
// the operation closed meanwhile, or taken up by a client's retry or a worker that now sends
// it with its key. For a record of a refund made, either is an answer, not a failure of the
// lookup, webhook or reconciliation that brought it: the resend is answered with that same
// record. A record that the side effect failed stays an error unless a close was told, so
// its webhook is delivered again and reaches the operation once the resend closed it.
func (l *Ledger) overtaken(ctx context.Context, op *Operation, rec ProviderRecord, err error) (Applied, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != ECONFLICT {
		return Applied{}, false
	}
	cur, gerr := l.Get(ctx, op.ID)
	switch {
	case e.Closed != nil:
		return Applied{Op: cur, Outcome: "already_closed"}, true
	case gerr != nil || !rec.Charged():
		return Applied{}, false
	case cur.Status.Final():
		return Applied{Op: cur, Outcome: "already_closed"}, true
	case cur.Leased(l.Clock.Now()):
		return Applied{Op: cur, Outcome: "in_flight"}, true
	}
	return Applied{}, false
}

// foreignRecord says why rec cannot be the record of op, whatever id its metadata carries:
// OutcomeForeignProvider when another provider keeps it (a refund at Stripe says nothing
// of what an LLM provider ran: it is no evidence that an uncertain call ran nothing, rule
// 11, nor that it succeeded, rule 9), OutcomeForeignAccount when another account of the
// provider keeps it, OutcomeOtherPayment when it moved money back to another payment than
// op's (closing op with it would tell op's customer of money another customer got, rules 9
// and 12), OutcomeOtherAmount when it moved another sum than op asks for (closing op with it
// would show op's amount moved on evidence of another, rules 9 and 12), "" when it may be
// op's. Only a record that names its payment is judged by it: a provider that names none
// (an LLM provider) has no payment to compare.
func foreignRecord(ctx context.Context, es EventStore, op *Operation, rec ProviderRecord) (string, error) {
	if rec.Provider != op.Provider {
		return OutcomeForeignProvider, nil
	}
	foreign, err := foreignAccount(ctx, es, op, rec)
	switch {
	case err != nil:
		return "", err
	case foreign:
		return OutcomeForeignAccount, nil
	}
	if op.PaymentRef != "" && rec.PaymentRef != "" && rec.PaymentRef != op.PaymentRef {
		return OutcomeOtherPayment, nil
	}
	if op.AmountCents > 0 && (rec.AmountCents != op.AmountCents || !strings.EqualFold(rec.Currency, op.Currency)) {
		return OutcomeOtherAmount, nil
	}
	return "", nil
}

// foreignAccount reports whether rec comes from another provider account than the one the
// operation was sent to: its tenant's account when the operation was opened, wherever the
// tenant is bound now, so a refund its old account fails after a move still fails it (rules
// 9 and 12), and no other account, the tenant's new one included, ever touches it. Such a
// record cannot be the operation's, whatever id its metadata carries. An operation opened
// before its account was recorded is judged by its tenant's current binding, as it was sent
// while no move was possible.
func foreignAccount(ctx context.Context, es EventStore, op *Operation, rec ProviderRecord) (bool, error) {
	if sent, ok := op.SentAccount(); ok {
		return sent != rec.Account, nil
	}
	want, err := es.ProviderAccount(ctx, op.TenantID, rec.Provider)
	if err != nil {
		return false, fmt.Errorf("read the account of tenant %d at %s: %w", op.TenantID, rec.Provider, err)
	}
	return want != rec.Account, nil
}

// failAfterSuccess moves a succeeded operation to failed because the provider's own record
// of it failed afterwards (a pending refund that the bank refused or Stripe canceled): the
// money did not move after all. It raises a reconciliation exception with it, so a person
// follows up with the customer who was told it was on its way. The exception comes first:
// once the operation is failed it is closed to every path, so an exception left for after
// the change would be lost with a process that died in between; raised first, it is there
// once the change is, and a repeat of the record raises it once only.
func (l *Ledger) failAfterSuccess(ctx context.Context, es EventStore, op *Operation, rec ProviderRecord, ev Evidence, actor string) (Applied, error) {
	now := l.Clock.Now()
	ev.ProviderRef, ev.RecordedBy, ev.RecordedAt = rec.Ref, actor, now
	if len(ev.Data) == 0 {
		ev.Data = rec.Raw
	}
	if err := es.RecordFailedAfterSuccess(ctx, op, rec, now); err != nil {
		return Applied{Op: op, Outcome: "error"}, fmt.Errorf("raise failed-after-success exception: %w", err)
	}
	out, err := l.transition(ctx, op, TransitionParams{ID: op.ID, Version: op.Version, From: StatusSucceeded, To: StatusFailed,
		Now: now, Actor: actor, Action: "fail_after_success", Reason: "the provider's " + rec.Ref + " is " + rec.Status + " after it succeeded",
		Evidence: &ev})
	if err != nil {
		return Applied{Op: op, Outcome: "error"}, err
	}
	return Applied{Op: out, Outcome: "failed_after_success"}, nil
}

// ReasonInFlight is the reason of the ECONFLICT an event that the provider's side effect
// failed is answered with while its operation is being sent: it is not recorded as seen, so
// the provider delivers it again once the send has closed the operation.
const ReasonInFlight = "in_flight"

// ApplyEvent applies a provider event once: a replayed event id changes nothing. An event
// that the side effect failed, naming an operation a worker is sending now, changes nothing
// and is not recorded: the resend is answered with the record as the provider first made it
// (a pending refund, under the same key), so the operation may close succeeded, and this
// event, delivered again, is then the only news that the money did not move (rules 9, 12).
// A record of a side effect made needs no second delivery: the resend gets that record.
func (l *Ledger) ApplyEvent(ctx context.Context, es EventStore, e ProviderEvent) (Applied, error) {
	seen, err := es.EventSeen(ctx, e.Provider, e.ID)
	if err != nil {
		return Applied{}, err
	}
	if seen {
		return Applied{Outcome: "replayed"}, nil
	}
	res := Applied{Outcome: "ignored"}
	if e.Record != nil {
		ev := Evidence{Kind: EvidenceWebhook, Summary: fmt.Sprintf("%s event %s: %s %s", e.Provider, e.ID, e.Type, e.Record.Status), Data: e.Payload}
		if res, err = l.ApplyRecord(ctx, es, *e.Record, ev, e.Provider+" webhook"); err != nil {
			return res, err
		}
		if res.Outcome == "in_flight" && !e.Record.Charged() {
			return res, &Error{Code: ECONFLICT, Reason: ReasonInFlight,
				Message: fmt.Sprintf("Operation %s is being sent now; %s event %s (%s %s) is applied once it is closed: deliver it again.", res.Op.ID, e.Provider, e.ID, e.Record.Ref, e.Record.Status)}
		}
	}
	opID := ""
	if res.Op != nil {
		opID = res.Op.ID
	}
	// Recorded last: a crash before this line only means the replay does the same again.
	if err := es.RecordEvent(ctx, e, opID, res.Outcome); err != nil {
		return res, fmt.Errorf("record event: %w", err)
	}
	return res, nil
}
