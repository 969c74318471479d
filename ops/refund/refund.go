package refund

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/settle-dev/settle/ops"
	"regexp"
	"strings"
	"time"
)

// Provider is what the refund tool needs from a payment provider.
type Provider interface {
	// Sender sends one refund attempt for an operation, with its provider key.
	ops.Sender
	// Name is the provider's name as stored on operations ("stripe").
	Name() string
	// Retention is how long the provider keeps idempotency keys.
	Retention() time.Duration
	// Payment returns what was paid and every refund the provider holds for a payment, read
	// within the tenant's share of the provider's reads.
	Payment(ctx context.Context, tenantID int64, paymentRef string) (Payment, error)
	// Lookup returns the provider's refunds that carry the operation's id.
	Lookup(ctx context.Context, op *ops.Operation) (ops.LookupResult, error)
}

// Payment is a payment at the provider with its refunds.
type Payment struct {
	Ref         string
	AmountCents int64
	Currency    string
	Refunds     []ops.ProviderRecord
	// Metadata is the payment's own metadata at the provider; it names its tenant.
	Metadata map[string]string
	// Account is the connected account the payment was read from: the calling tenant's own
	// (its binding), "" for the platform account. A payment in the tenant's own account is
	// the tenant's without a label; one in the platform account must carry its name.
	Account string
}

// DefaultTenantKey is the metadata key naming the tenant a payment belongs to.
const DefaultTenantKey = "settle_tenant"

// UnknownPayment is the answer for a payment the provider does not have, and, word for
// word, for one that is another tenant's: nobody learns a foreign payment's amount,
// currency or refunds from a refusal.
func UnknownPayment(ref string, cause error) error {
	return &ops.Error{Code: ops.EINVALID, Reason: "unknown_payment", Message: fmt.Sprintf("Stripe has no payment %s.", ref), Err: cause}
}

// Store is what the refund tool needs from the store beyond the ledger.
type Store interface {
	// OpenForPayment lists a tenant's open operations on one payment.
	OpenForPayment(ctx context.Context, tenantID int64, paymentRef string) ([]*ops.Operation, error)
	// LastAttemptError returns the error code of an operation's latest finished attempt.
	LastAttemptError(ctx context.Context, opID string) (string, error)
	// MadeCharges reads the refunds of an operation that took money, for a failed one's
	// answer (ops rule 12).
	ops.MadeCharges
}

// Request is one call of the refund tool.
type Request struct {
	TenantID      int64
	OrderID       string
	AmountCents   int64
	Currency      string
	PaymentIntent string
	Reason        string
	// RequestRef is the caller's id for this call, such as an agent's tool call id.
	RequestRef string
	// Tenant is the calling tenant's name, which its payments carry in their metadata.
	Tenant string
}

// The answers of the refund tool. They are the only five things a caller may tell a customer.
const (
	Refunded    = "refunded"
	Unconfirmed = "unconfirmed"
	Checking    = "checking"
	Failed      = "failed"
	// Pending: Stripe accepted the refund and it is on its way, but it is not money back yet.
	Pending = "refund_pending"
)

// CheckingNote is the sentence that goes with "checking".
const CheckingNote = "Outcome unknown. A person is checking. Do not say the refund succeeded or failed."

// Answer is the truth about a refund, as far as it is known.
type Answer struct {
	Status      string `json:"status"`
	OperationID string `json:"operation_id"`
	RefundID    string `json:"refund_id,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Note        string `json:"note,omitempty"`
	// OtherRefunds are, for a failed refund, the refunds of the same operation that Settle
	// holds as having taken money (a double refund recorded against it): while there is one,
	// a failed refund is not "nothing was refunded" (ops rule 12).
	OtherRefunds []MadeRefund `json:"other_refunds,omitempty"`
}

// MadeRefund is a refund of an operation that Settle holds as having taken money.
type MadeRefund struct {
	RefundID    string `json:"refund_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
}

// OtherRefundsNote is the note of a failed refund with OtherRefunds.
const OtherRefundsNote = "This refund moved no money, but another refund of the same request was made and is on its way (other_refunds). Tell the customer that one is on its way, not that no money moved, and do not refund again."

// Made is a's other refunds as the provider's records, for the customer's sentence.
func (a Answer) Made() []ops.ProviderRecord {
	out := make([]ops.ProviderRecord, len(a.OtherRefunds))
	for i, r := range a.OtherRefunds {
		out[i] = ops.ProviderRecord{Ref: r.RefundID, OperationID: a.OperationID, AmountCents: r.AmountCents, Currency: r.Currency, Status: r.Status}
	}
	return out
}

// Tool is the refund tool: one refund per intent however often it is called.
type Tool struct {
	Ledger   *ops.Ledger
	Store    Store
	Provider Provider
	// Deadline bounds one call, all attempts and backoff included. It must be shorter than
	// the caller's own HTTP timeout.
	Deadline time.Duration
	Sleep    ops.Sleeper
	// TenantKey is the payment metadata key naming its tenant (default settle_tenant). A
	// tenant refunds only payments that carry its name there, unless it is bound to a
	// connected account: the provider then shows it that account's payments only, and each
	// of them is its own.
	TenantKey string
	// AnyTenantsPayments turns the ownership check off, for an install with one tenant: then
	// any token may refund any payment of the Stripe account.
	AnyTenantsPayments bool
	// ReplayFor is how long the same order, amount and currency answer with the refund
	// already made for them instead of making another (default ReplayWindow). Every answer
	// but "refunded" tells the caller that calling again is safe; a caller who does so after
	// the refund went through, by a lookup, the reaper or a person, must get that refund, not
	// a second one, even when the payment has room for it.
	ReplayFor time.Duration
}

// ReplayWindow is the default of Tool.ReplayFor: longer than any retry of a customer's
// request (an agent's session, a support ticket's follow-up). Refunding the same amount of
// one order twice on purpose waits until it ends.
const ReplayWindow = 7 * 24 * time.Hour

var (
	orderRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,63}$`)
	paymentRe = regexp.MustCompile(`^pi_[A-Za-z0-9_]{1,250}$`)
	reasons   = map[string]bool{"": true, "duplicate": true, "fraudulent": true, "requested_by_customer": true}
	// currencies Stripe refunds in that Settle accepts; amounts are in the minor unit.
	currencies = map[string]bool{"usd": true, "eur": true, "gbp": true, "kzt": true, "rub": true, "jpy": true, "cad": true,
		"aud": true, "chf": true, "sek": true, "nok": true, "dkk": true, "pln": true, "czk": true, "try": true, "inr": true,
		"brl": true, "mxn": true, "sgd": true, "hkd": true, "nzd": true, "cny": true, "krw": true, "uah": true, "ils": true}
)

// MaxCents is the largest refund accepted in one call; anything above is a mistake.
const MaxCents = 100_000_000

// Validate checks a refund request and normalises its currency.
func (r *Request) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"order_id", r.OrderID, 64}, {"currency", r.Currency, 16}, {"payment_intent", r.PaymentIntent, ops.MaxRefBytes},
		{"reason", r.Reason, 64}, {"request_ref", r.RequestRef, ops.MaxRefBytes}} {
		if err := ops.CheckRef(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	r.Currency = strings.ToLower(strings.TrimSpace(r.Currency))
	switch {
	case r.TenantID <= 0:
		return ops.Errorf(ops.EUNAUTHORIZED, "A tenant is required.")
	case r.OrderID == "":
		return &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "order_id is required."}
	case !orderRe.MatchString(r.OrderID):
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: "order_id must be 1-64 letters, digits or _.:#/-."}
	case r.AmountCents <= 0:
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_amount", Message: "amount_cents must be a positive whole number of cents."}
	case r.AmountCents > MaxCents:
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_amount", Message: fmt.Sprintf("amount_cents over %d is refused as a likely mistake.", MaxCents)}
	case r.Currency == "":
		return &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "currency is required."}
	case !currencies[r.Currency]:
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_currency", Message: fmt.Sprintf("currency %q is not supported.", r.Currency)}
	case r.PaymentIntent == "":
		return &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "payment_intent is required."}
	case !paymentRe.MatchString(r.PaymentIntent):
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: "payment_intent must look like pi_..."}
	case !reasons[r.Reason]:
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: "reason must be duplicate, fraudulent or requested_by_customer."}
	case len(r.RequestRef) > 255:
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: "request_ref is longer than 255 characters."}
	}
	return nil
}

// IntentKey is the intent of a refund: order, amount and currency, scoped by tenant.
func IntentKey(order string, cents int64, currency string) string {
	return fmt.Sprintf("%s|%d|%s", order, cents, currency)
}

// refundBody is what an operation stores of its refund request.
type refundBody struct {
	Reason string `json:"reason,omitempty"`
}

// StoredReason returns the refund reason stored on a refund operation.
func StoredReason(op *ops.Operation) string {
	var b refundBody
	_ = json.Unmarshal(op.Request, &b)
	return b.Reason
}

// Refund performs the refund of req at most once and answers truthfully. When the database
// cannot be reached the error says whether this call sent anything to Stripe (ops rule 12).
func (s *Tool) Refund(ctx context.Context, req Request) (ans Answer, err error) {
	var opID string
	var sent bool
	defer func() { err = s.outage(err, opID, sent) }()
	if err := req.Validate(); err != nil {
		if req.TenantID > 0 {
			return Answer{}, s.Refuse(ctx, req.TenantID, ops.CleanRef(req.RequestRef), err)
		}
		return Answer{}, err
	}
	owner := ops.NewOwner("refund", "")
	pol := Kind().Policy
	in := ops.Intent{
		TenantID: req.TenantID, Kind: ops.KindRefund, Provider: s.Provider.Name(),
		IntentKey: IntentKey(req.OrderID, req.AmountCents, req.Currency),
		Fingerprint: ops.Fingerprint(map[string]any{"order_id": req.OrderID, "amount": req.AmountCents, "currency": req.Currency,
			"payment_intent": req.PaymentIntent, "reason": req.Reason}),
		OrderRef: req.OrderID, PaymentRef: req.PaymentIntent, AmountCents: req.AmountCents, Currency: req.Currency,
		Retention: s.Provider.Retention(), RequestRef: req.RequestRef, Owner: owner, ReplayFor: s.replayFor(),
		Policy: &pol,
		// A new refund must fit in what is left of the payment.
		Check: func(ctx context.Context) error { return s.checkRemainder(ctx, req) },
	}
	in.Request, _ = json.Marshal(refundBody{Reason: req.Reason})
	// The whole call, the provider reads of admission included, runs within its deadline.
	ctx, cancel := context.WithTimeout(ctx, s.deadline())
	defer cancel()
	adm, err := s.Ledger.Admit(ctx, in)
	if adm.Op != nil {
		opID = adm.Op.ID
	}
	if adm.Verdict == ops.VerdictConflict {
		// The same order and amount with another optional argument: this intent is already
		// being refunded, so the truthful answer is that refund's status, not a refusal
		// that reads as "nothing was refunded".
		a, aerr := s.answer(context.WithoutCancel(ctx), adm.Op)
		a.Note = strings.TrimSpace(a.Note + " " + fmt.Sprintf(OtherParamsNote, adm.Op.ID))
		return a, aerr
	}
	if err != nil {
		return Answer{}, err
	}
	op := adm.Op
	switch adm.Verdict {
	case ops.VerdictSend:
		op, err = s.Ledger.Run(ctx, op, s.Provider, ops.RunSpec{Owner: owner, First: adm.Attempt, Sleep: s.Sleep,
			Hooks: ops.Hooks{BeforeSend: func(context.Context, *ops.Operation, *ops.Attempt, bool) error {
				sent = true
				return nil
			}}})
	}
	if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
		return Answer{}, err
	}
	return s.answer(context.WithoutCancel(ctx), op)
}

// NothingSentNote is what a call that met an outage of the database before it sent anything
// tells its caller to do.
const NothingSentNote = "Call again with the same arguments in a few seconds: it never refunds twice."

// MayHaveRunNote is what a call that met an outage of the database after it sent operation
// %s to Stripe tells its caller; %s is the operation's lease.
const MayHaveRunNote = "The refund may have been made: do not say it succeeded or failed. Calling again with the same arguments is safe: once operation %s's lease runs out (%s), the call or the reaper resends it with the same idempotency key, which Stripe answers with the refund it made, never a second one."

// outage words err, when it is an outage of the database, for the caller: nothing was sent
// when the call stopped before Stripe was asked, and the refund may have been made when it
// stopped after (ops rule 12).
func (s *Tool) outage(err error, opID string, sent bool) error {
	if sent || ops.ErrorReason(err) == ops.ReasonOutcomeUnrecorded {
		return ops.MayHaveRun(err, fmt.Sprintf(MayHaveRunNote, opID, s.Ledger.Limits.Lease))
	}
	return ops.NothingSent(err, NothingSentNote)
}

// Refuse records a refund request refused before its operation was opened (malformed, too
// large), so every client request is counted (ops rule 8), and returns its answer: refusal,
// or the outage when the database could not be reached to record it.
func (s *Tool) Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error {
	return s.Ledger.Refuse(ctx, tenantID, ops.KindRefund, requestRef, refusal)
}

func (s *Tool) tenantKey() string {
	if s.TenantKey != "" {
		return s.TenantKey
	}
	return DefaultTenantKey
}

func (s *Tool) replayFor() time.Duration {
	if s.ReplayFor > 0 {
		return s.ReplayFor
	}
	return ReplayWindow
}

func (s *Tool) deadline() time.Duration {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return 25 * time.Second
}

// answer turns the operation's status into one of the four truthful answers.
func (s *Tool) answer(ctx context.Context, op *ops.Operation) (Answer, error) {
	return AnswerFor(ctx, s.Store, op)
}

// OtherParamsNote goes with the answer to a call whose order and amount were already asked
// for with other parameters (a reason, a payment): they were not used. It names no outcome,
// since that operation may be open, refunded or refused, and its status is the answer's
// (ops rule 12).
const OtherParamsNote = "This order and amount were already asked for in operation %s with other parameters; this answer is that operation's, this call's other parameters were not used and nothing new was sent."

// PendingNote is the sentence that goes with "refund_pending".
const PendingNote = "Stripe accepted the refund and it is on its way, but the bank has not settled it yet; it may still fail, and if it does this operation will say so."

// IsPending reports whether a succeeded refund is still pending at the provider (pending or
// requires_action): accepted, on its way, not yet money back.
func IsPending(op *ops.Operation) bool {
	var r struct {
		Status string `json:"status"`
	}
	if !Kind().Of(op) || op.Status != ops.StatusSucceeded || json.Unmarshal(op.Result, &r) != nil {
		return false
	}
	return r.Status == "pending" || r.Status == "requires_action"
}

// UnconfirmedNote is the sentence that goes with "unconfirmed".
const UnconfirmedNote = "Not confirmed yet. Calling again with the same arguments within 7 days is safe: it answers with this refund and never refunds twice."

// ReasonFailedAfterSuccess is the reason of a failed refund Stripe had accepted: it failed
// or was canceled later, after the customer may have been told it was on its way.
const ReasonFailedAfterSuccess = "failed_after_success"

// AnswerFor says what a refund operation's status allows a caller to say: refunded
// only with the provider's refund id, checking while nobody knows.
func AnswerFor(ctx context.Context, attempts interface {
	LastAttemptError(ctx context.Context, opID string) (string, error)
	ops.MadeCharges
}, op *ops.Operation) (Answer, error) {
	a := Answer{OperationID: op.ID}
	switch op.Status {
	case ops.StatusSucceeded:
		a.Status, a.RefundID = Refunded, op.ProviderRef
		if IsPending(op) {
			a.Status, a.Note = Pending, PendingNote
		}
	case ops.StatusFailed:
		a.Status = Failed
		code, err := attempts.LastAttemptError(ctx, op.ID)
		if err != nil {
			return a, fmt.Errorf("read why %s failed: %w", op.ID, err)
		}
		switch {
		case code == "" && op.ProviderRef != "":
			// Its attempt was answered with the refund: the refund failed after that.
			code = ReasonFailedAfterSuccess
		case code == "":
			code = "refused"
		}
		a.Reason = code
		return a, otherRefunds(ctx, attempts, &a)
	case ops.StatusUnknown, ops.StatusExpired:
		a.Status, a.Note = Checking, CheckingNote
	default:
		a.Status, a.Note = Unconfirmed, UnconfirmedNote
	}
	return a, nil
}

// otherRefunds adds to a, a failed refund's answer, the refunds of its operation that r holds
// as made, and the note that goes with them.
func otherRefunds(ctx context.Context, r ops.MadeCharges, a *Answer) error {
	made, err := r.MadeCharges(ctx, a.OperationID)
	if err != nil {
		return fmt.Errorf("read the refunds made of %s: %w", a.OperationID, err)
	}
	for _, c := range made {
		a.OtherRefunds = append(a.OtherRefunds, MadeRefund{RefundID: c.Ref, AmountCents: c.AmountCents, Currency: c.Currency, Status: c.Status})
	}
	if len(made) > 0 {
		a.Note = OtherRefundsNote
	}
	return nil
}

func (s *Tool) checkRemainder(ctx context.Context, req Request) error {
	p, err := s.Provider.Payment(ctx, req.TenantID, req.PaymentIntent)
	if err != nil {
		return err
	}
	if !s.AnyTenantsPayments && p.Account == "" && p.Metadata[s.tenantKey()] != req.Tenant {
		return UnknownPayment(req.PaymentIntent, nil)
	}
	if p.Currency != "" && p.Currency != req.Currency {
		return &ops.Error{Code: ops.EINVALID, Reason: "currency_mismatch", Message: fmt.Sprintf("Payment %s was made in %s, not %s.", req.PaymentIntent, p.Currency, req.Currency)}
	}
	atProvider := map[string]bool{}
	var refunded int64
	for _, r := range p.Refunds {
		if r.Charged() {
			refunded += r.AmountCents
			atProvider[r.OperationID] = true
		}
	}
	open, err := s.Store.OpenForPayment(ctx, req.TenantID, req.PaymentIntent)
	if err != nil {
		return err
	}
	var inFlight int64
	for _, op := range open {
		if !atProvider[op.ID] {
			inFlight += op.AmountCents
		}
	}
	if left := p.AmountCents - refunded - inFlight; req.AmountCents > left {
		return &ops.Error{Code: ops.EINVALID, Reason: "amount_over_remainder", Message: fmt.Sprintf(
			"A refund of %d exceeds what is left of payment %s: %d paid, %d refunded, %d in refunds not yet settled, %d left.",
			req.AmountCents, req.PaymentIntent, p.AmountCents, refunded, inFlight, max(left, 0))}
	}
	return nil
}

// Lookup asks the provider about one operation and, when a record explains an operation
// nobody is sending for, closes it with the record as evidence. None found closes nothing;
// neither does a record that only names it (ops.NotItsRecord).
func (s *Tool) Lookup(ctx context.Context, es ops.EventStore, opID, actor string) (ops.LookupResult, ops.Applied, error) {
	op, err := s.Ledger.Get(ctx, opID)
	if err != nil {
		return ops.LookupResult{}, ops.Applied{}, err
	}
	res, err := s.Provider.Lookup(ctx, op)
	if err != nil {
		return res, ops.Applied{}, err
	}
	applied := ops.Applied{Op: op, Outcome: "not_found"}
	for i, rec := range res.Records {
		ev := ops.Evidence{Kind: ops.EvidenceLookup, Summary: fmt.Sprintf("Lookup at %s found %s (%s, %s).", op.Provider, rec.Ref, ops.FormatMoney(rec.AmountCents, rec.Currency), rec.Status)}
		a, err := s.Ledger.ApplyRecord(ctx, es, rec, ev, actor)
		if err != nil {
			return res, a, err
		}
		if i == 0 || (ops.NotItsRecord(applied.Outcome) && !ops.NotItsRecord(a.Outcome)) {
			applied = a
		}
	}
	return res, applied, nil
}
