package ops

import (
	"encoding/json"
	"time"
)

// Status is where an operation stands. The package documentation has the diagram.
type Status string

// The operation statuses.
const (
	StatusReceived   Status = "received"
	StatusInProgress Status = "in_progress"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusUnknown    Status = "unknown"
	StatusExpired    Status = "expired"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusReceived, StatusInProgress, StatusSucceeded, StatusFailed, StatusUnknown, StatusExpired}

// OpenStatuses are the non-final statuses: an intent has at most one operation in them.
var OpenStatuses = []Status{StatusReceived, StatusInProgress, StatusUnknown, StatusExpired}

// Final reports whether nothing can change the status any more.
func (s Status) Final() bool { return s == StatusSucceeded || s == StatusFailed }

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// Phase refines in_progress: how far the current attempt got.
type Phase string

// The phases of an in-progress operation.
const (
	PhaseNone           Phase = ""
	PhaseSending        Phase = "sending"
	PhaseSentToProvider Phase = "sent_to_provider"
	PhaseFirstToken     Phase = "first_token"
)

// Kind is what sort of paid side effect an operation causes.
type Kind string

// The operation kinds.
const (
	KindRefund  Kind = "refund"
	KindLLMCall Kind = "llm_call"
	KindLLMJob  Kind = "llm_job"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindRefund || k == KindLLMCall || k == KindLLMJob }

// Operation is one intent that causes a paid or side-effecting call at a provider.
type Operation struct {
	ID       string
	TenantID int64
	Kind     Kind
	Provider string
	// IntentKey makes two client requests the same intent, scoped by tenant and kind.
	IntentKey string
	// ProviderKey is the idempotency key sent to the provider on every attempt.
	ProviderKey string
	Fingerprint string

	OrderRef    string
	CustomerRef string
	ChatRef     string
	PaymentRef  string
	AmountCents int64
	Currency    string
	Request     json.RawMessage

	Status     Status
	Phase      Phase
	Version    int64
	Attempts   int
	LeaseOwner string
	LeaseUntil *time.Time
	// FirstSentAt is when the first attempt left; RetryUntil is how long the provider keeps
	// our key from then on, minus a margin. Past it a resend could charge twice.
	FirstSentAt *time.Time
	RetryUntil  *time.Time
	// Retention is how long the provider keeps idempotency keys; zero means it keeps none.
	Retention time.Duration
	// Policy is how the operation treats an attempt whose outcome is uncertain, fixed when it
	// was opened (its tenant's, its route's or its deployment's setting then): every process
	// that sends, reaps or closes it reads it here.
	Policy Policy

	ProviderRef       string
	ProviderRequestID string
	Result            json.RawMessage
	Usage             json.RawMessage
	CostMicros        int64

	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  *time.Time
	ClosedBy  string
	// KeyWaits counts the attempts the provider answered "key in use" (409): they executed
	// nothing and are left out of the operation's budget.
	KeyWaits int
	// API is the label of the API an LLM operation called ("chat_completions", "responses"),
	// and Model the model its request named, both kept on the operation's row from its
	// opening: the purge deletes the request that names them, and the pages, the metrics and
	// the usage comparison still say them afterwards. Empty for an operation of no API (a
	// refund).
	API   string
	Model string
	// StoreOptedOut says the client of an LLM call sent store: false, asking the provider to
	// keep no copy of it, so there is nothing in the provider's store to look up (rule 12).
	// Kept on the row from the opening, like API and Model, since the purge deletes the
	// request that says it.
	StoreOptedOut bool
	// StripeAccount is the Stripe account a Stripe operation is sent to, read from its
	// tenant's binding by the statement that opened it: a connected account (acct_…), "" for
	// the platform account. Every attempt and lookup of the operation goes there, and only
	// that account's records settle it, even after its tenant is moved to another account
	// (rule 9). Nil for an operation of another provider, and for one opened before the
	// account was recorded, which is read in its tenant's current account instead.
	StripeAccount *string
	// PurgedAt is when the operation's request and result (an LLM prompt and its completion)
	// were deleted, once kept past the key's TTL and the bodies' keep: the row, its usage and
	// its fingerprint stay, and a replay can tell an answer no longer kept from one never
	// stored. Nil while the bodies are kept.
	PurgedAt *time.Time
}

// SentAccount returns the provider account the operation is sent to, and false when it was
// not recorded (see StripeAccount): the caller then asks its tenant's current binding.
func (o *Operation) SentAccount() (string, bool) {
	if o.StripeAccount == nil {
		return "", false
	}
	return *o.StripeAccount, true
}

// Sends is how many of the operation's attempts count against its budget (rule 4): every
// attempt but those the provider turned away while it still ran the key.
func (o *Operation) Sends() int { return o.Attempts - o.KeyWaits }

// Stalled reports whether the operation is in progress with a lease that ran out.
func (o *Operation) Stalled(now time.Time) bool {
	return o.Status == StatusInProgress && o.LeaseUntil != nil && !o.LeaseUntil.After(now)
}

// Leased reports whether a worker holds a live lease on the operation.
func (o *Operation) Leased(now time.Time) bool {
	return o.Status == StatusInProgress && o.LeaseUntil != nil && o.LeaseUntil.After(now)
}

// PastRetention reports whether the provider may have forgotten our key.
func (o *Operation) PastRetention(now time.Time) bool {
	return o.RetryUntil != nil && !o.RetryUntil.After(now)
}

// Answer is how a client request was answered.
type Answer string

// The answers a client request can get.
const (
	AnswerNew        Answer = "new"
	AnswerReplayed   Answer = "replayed"
	AnswerInProgress Answer = "in_progress"
	AnswerConflict   Answer = "conflict"
	AnswerChecking   Answer = "checking"
	AnswerRetried    Answer = "retried"
	AnswerRejected   Answer = "rejected"
)

// The answers of a client's cancel of what an operation started (a background response):
// a request that names an existing operation but asks for no intent of its own, so it is
// neither new nor a duplicate (rule 8 counts it all the same).
const (
	// AnswerCancelled: the provider cancelled it (or had already).
	AnswerCancelled Answer = "cancelled"
	// AnswerCancelTooLate: the provider refused it because what it names had ended first.
	AnswerCancelTooLate Answer = "cancel_too_late"
	// AnswerCancelFailed: the provider could not be asked or its answer could not be read;
	// whether it cancelled anything is not known.
	AnswerCancelFailed Answer = "cancel_failed"
	// AnswerCancelRefused: refused, by Settle (an id not the tenant's own, a malformed one)
	// or by the provider (a response it cannot cancel, or no longer holds).
	AnswerCancelRefused Answer = "cancel_refused"
)

// Cancel reports whether a is the answer of a cancel.
func (a Answer) Cancel() bool {
	switch a {
	case AnswerCancelled, AnswerCancelTooLate, AnswerCancelFailed, AnswerCancelRefused:
		return true
	}
	return false
}

// ClientRequest is one time a client asked: a tool call, a click, an HTTP request.
type ClientRequest struct {
	ID          int64
	TenantID    int64
	OperationID string
	RequestRef  string
	// RequestID is Settle's id of the HTTP request that made it (X-Request-Id, and the
	// request_id of its log lines); empty when no HTTP request did.
	RequestID  string
	Duplicate  bool
	Answer     Answer
	ReceivedAt time.Time
	AnsweredAt *time.Time
}

// Outcome is what one attempt at the provider came to.
type Outcome string

// The attempt outcomes, as the package documentation describes them.
const (
	OutcomeOK          Outcome = "ok"
	OutcomeTimeout     Outcome = "timeout"
	OutcomeRateLimited Outcome = "rate_limited"
	OutcomeKeyInUse    Outcome = "key_in_use"
	OutcomeServerError Outcome = "server_error"
	OutcomeInvalid     Outcome = "invalid"
	OutcomeNotSent     Outcome = "not_sent"
)

// Valid reports whether o is a known outcome.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeOK, OutcomeTimeout, OutcomeRateLimited, OutcomeKeyInUse, OutcomeServerError, OutcomeInvalid, OutcomeNotSent:
		return true
	}
	return false
}

// Uncertain reports whether an attempt that ended so may have been executed by the
// provider although Settle does not know its result: a timeout, or a saved 500 whose
// request may have gone through (rule 5). An unfinished attempt (its process died) is
// uncertain too; see Attempt.Uncertain. A 409 "key in use" is not: the provider turned that
// send away while it still ran an earlier one with the key, which a resend can only replay.
func (o Outcome) Uncertain() bool {
	return o == OutcomeTimeout || o == OutcomeServerError
}

// Attempt is one send to a provider.
type Attempt struct {
	ID                int64
	OperationID       string
	N                 int
	ProviderKey       string
	Owner             string
	StartedAt         time.Time
	FinishedAt        *time.Time
	Outcome           Outcome
	HTTPStatus        int
	ProviderRequestID string
	ErrorCode         string
	Duration          time.Duration
}

// Uncertain reports whether the provider may have executed this attempt without Settle
// knowing: it never finished (its process died mid-send) or it ended uncertain.
func (a *Attempt) Uncertain() bool { return a.FinishedAt == nil || a.Outcome.Uncertain() }

// ErrorLeaseExpired is the error code of an attempt whose end was recorded by another
// process than the one that sent it: the reaper or a worker that took the operation over
// once the sender's lease ran out, or the expiry at the key retention's end.
const ErrorLeaseExpired = "lease_expired"

// SendMayRunUntil is when the send of a may last be running, and whether that is unknown
// to its record. An attempt its sender finished ended with its record. One finished by
// another process (ErrorLeaseExpired) lost its lease, not necessarily its call: a sender
// cut off from the database goes on sending without renewing its lease. Every send is
// begun before the key retention, less its margin, ends, so that it reaches the provider
// while the key is kept; so a send lasts less than the margin, and the margin from the
// attempt's start bounds it.
func (a *Attempt) SendMayRunUntil(margin time.Duration) (time.Time, bool) {
	if a.FinishedAt == nil || a.ErrorCode != ErrorLeaseExpired {
		return time.Time{}, false
	}
	return a.StartedAt.Add(margin), true
}

// EvidenceKind says where evidence came from.
type EvidenceKind string

// The kinds of evidence.
const (
	EvidenceProviderResponse EvidenceKind = "provider_response"
	EvidenceLookup           EvidenceKind = "lookup"
	EvidenceWebhook          EvidenceKind = "webhook"
	EvidenceReconciliation   EvidenceKind = "reconciliation"
	EvidenceNote             EvidenceKind = "note"
)

// FromProvider reports whether the evidence is the provider's own word.
func (k EvidenceKind) FromProvider() bool {
	return k == EvidenceProviderResponse || k == EvidenceLookup || k == EvidenceWebhook || k == EvidenceReconciliation
}

// Evidence justifies closing an operation.
type Evidence struct {
	ID          int64
	OperationID string
	Kind        EvidenceKind
	// ProviderRef is the provider's id for what it did (a refund id, a request id).
	ProviderRef string
	Summary     string
	Data        json.RawMessage
	RecordedBy  string
	RecordedAt  time.Time
}
