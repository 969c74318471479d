package ops

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// transitions lists every allowed status change. Anything absent is forbidden; final
// statuses have no way out.
var transitions = map[Status][]Status{
	StatusReceived:   {StatusInProgress, StatusFailed, StatusUnknown, StatusExpired},
	StatusInProgress: {StatusInProgress, StatusSucceeded, StatusFailed, StatusUnknown, StatusExpired},
	StatusUnknown:    {StatusSucceeded, StatusFailed, StatusExpired},
	StatusExpired:    {StatusSucceeded, StatusFailed},
	// Only the provider's own record takes a success back: a refund it accepted (pending)
	// and later failed or canceled (Ledger.ApplyRecord). Nothing else leaves succeeded.
	StatusSucceeded: {StatusFailed},
}

// CanTransition reports whether an operation may move from one status to another.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition returns an EINVALID error when from → to is not allowed.
func CheckTransition(from, to Status) error {
	if !CanTransition(from, to) {
		return Errorf(EINVALID, "An operation cannot go from %s to %s.", from, to)
	}
	return nil
}

// Limits bound the retries of one operation (rule 4).
type Limits struct {
	AttemptsPerCall      int
	AttemptsPerOperation int
	// Lease is how long a worker owns an in-progress operation before it counts as stalled.
	Lease time.Duration
	// RetentionMargin is taken off the provider's key retention so that we stop resending
	// well before the provider forgets the key.
	RetentionMargin time.Duration
	BaseBackoff     time.Duration
	MaxBackoff      time.Duration
	// KeyInUseMaxWait caps the wait after a "key in use" answer (at least a second).
	KeyInUseMaxWait time.Duration
}

// DefaultLimits are the limits of rule 4.
var DefaultLimits = Limits{
	AttemptsPerCall:      3,
	AttemptsPerOperation: 6,
	Lease:                30 * time.Second,
	RetentionMargin:      time.Hour,
	BaseBackoff:          200 * time.Millisecond,
	MaxBackoff:           5 * time.Second,
	KeyInUseMaxWait:      8 * time.Second,
}

// CheckSend returns an error unless owner may send a new attempt for op now: the operation
// must be in progress under owner's live lease, its outcome known so far, the provider's key
// retention not passed and the attempt budget not spent.
func CheckSend(op *Operation, owner string, now time.Time, lim Limits) error {
	switch op.Status {
	case StatusUnknown:
		return Errorf(ECONFLICT, "Operation %s has an unknown outcome; nothing is sent until someone closes it.", op.ID)
	case StatusExpired:
		return Errorf(ECONFLICT, "Operation %s is past the provider's key retention; it is never sent again.", op.ID)
	case StatusInProgress:
	default:
		return Errorf(ECONFLICT, "Operation %s is %s; only an in-progress operation is sent.", op.ID, op.Status)
	}
	if op.LeaseOwner != owner || !op.Leased(now) {
		return Errorf(ECONFLICT, "Operation %s is not leased to %s.", op.ID, owner)
	}
	if op.PastRetention(now) {
		return Errorf(ECONFLICT, "Operation %s is past the provider's key retention; it is never sent again.", op.ID)
	}
	if op.Sends() >= lim.AttemptsPerOperation {
		return Errorf(ECONFLICT, "Operation %s has used all %d attempts.", op.ID, lim.AttemptsPerOperation)
	}
	return nil
}

// CheckClose returns an error unless a person or process may close op as to with ev now.
// Closing is for operations nobody is sending for: unknown, expired, or in progress with a
// lease that ran out. Succeeded needs the provider's word (rule 9).
func CheckClose(op *Operation, to Status, ev Evidence, now time.Time) error {
	if !to.Final() {
		return Errorf(EINVALID, "Close to succeeded or failed, not %s.", to)
	}
	if op.Status.Final() {
		return AlreadyClosed(op)
	}
	if op.Leased(now) {
		return Errorf(ECONFLICT, "A worker is sending operation %s until %s; it cannot be closed now.", op.ID, op.LeaseUntil.Format(time.RFC3339))
	}
	if err := CheckTransition(op.Status, to); err != nil {
		return err
	}
	if ev.Kind == "" {
		return Errorf(EINVALID, "Closing needs evidence.")
	}
	if ev.Kind == EvidenceNote && ev.Summary == "" {
		return Errorf(EINVALID, "A note that closes an operation cannot be empty.")
	}
	if to == StatusSucceeded && !ev.Kind.FromProvider() && ev.ProviderRef == "" {
		return Errorf(EINVALID, "Succeeded needs the provider's record: give its id (for a refund, re_...).")
	}
	return nil
}

// CheckNotExecuted returns an error unless op may be closed as "not executed" now: it is
// open, nobody holds a live lease, no attempt is still without a result, the provider's
// key retention has passed, so no resend with our key can ever run it, and no attempt whose
// lease ran out may still be sending (rule 11). The caller adds the last piece of evidence:
// a fresh lookup that finds nothing.
func CheckNotExecuted(op *Operation, attempts []Attempt, now time.Time, lim Limits) error {
	if op.Status.Final() {
		return AlreadyClosed(op)
	}
	if op.Leased(now) {
		return Errorf(ECONFLICT, "A worker is sending operation %s until %s; it cannot be closed now.", op.ID, op.LeaseUntil.UTC().Format(time.RFC3339))
	}
	for _, a := range attempts {
		if a.FinishedAt == nil {
			return Errorf(ECONFLICT, "Attempt %d of operation %s has no result yet; it cannot be closed as not executed.", a.N, op.ID)
		}
	}
	if !op.PastRetention(now) {
		if op.RetryUntil == nil {
			return Errorf(EINVALID, "Operation %s has no key retention to wait out; close it by hand with a note.", op.ID)
		}
		return Errorf(EINVALID, "The provider keeps the key of operation %s until %s; it cannot be closed as not executed before then.", op.ID, op.RetryUntil.UTC().Format(time.RFC3339))
	}
	return checkNoSendRunning(op, attempts, now, lim)
}

// checkNoSendRunning refuses a close as not executed while an attempt whose lease ran out
// may still be sending: a lookup that finds nothing then only shows that its call has not
// landed yet (rule 11).
func checkNoSendRunning(op *Operation, attempts []Attempt, now time.Time, lim Limits) error {
	for i := range attempts {
		if until, ok := attempts[i].SendMayRunUntil(lim.RetentionMargin); ok && until.After(now) {
			return Errorf(ECONFLICT, "Attempt %d of operation %s lost its lease without a result, and its send may still reach %s until %s; it cannot be closed as not executed before then.",
				attempts[i].N, op.ID, op.Provider, until.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Uncertain reports whether any of an operation's attempts may have been executed by the
// provider without Settle knowing.
func Uncertain(attempts []Attempt) bool {
	for i := range attempts {
		if attempts[i].Uncertain() {
			return true
		}
	}
	return false
}

// CheckFail returns an error unless op may be closed as failed with ev now (rule 11).
// Failed frees the intent for a new operation with a new key, so while any attempt may have
// been executed it needs evidence that nothing was: the provider's own record of a refusal,
// or, for a kind the provider can be asked about, a fresh lookup that found nothing after
// the key retention ended with no attempt in flight. For a kind without a lookup a person's
// note is accepted: the intent then keeps answering with the failure until its key's TTL
// ends, so nothing is sent again meanwhile.
func CheckFail(op *Operation, attempts []Attempt, ev Evidence, pol Policy, now time.Time, lim Limits) error {
	switch {
	case !Uncertain(attempts):
		return nil
	case ev.Kind.FromProvider() && ev.ProviderRef != "":
		return nil // the provider's record of what happened to it
	case ev.Kind == EvidenceLookup:
		return CheckNotExecuted(op, attempts, now, lim)
	case !pol.HasLookup:
		return nil
	}
	return &Error{Code: EINVALID, Reason: ReasonMayHaveRun, Message: fmt.Sprintf(
		"Operation %s cannot be closed as failed: an attempt's outcome is uncertain, so %s may have run it, and a new attempt with a new key could run it twice. "+
			"Look it up: close it as succeeded with the provider's record, or leave it open until the key retention ends and close it as not executed.", op.ID, op.Provider)}
}

// ReasonMayHaveRun refuses a failed close while the provider may have run the operation.
const ReasonMayHaveRun = "may_have_run"

// AlreadyClosed is the error a change to a closed operation gets: ECONFLICT naming who
// closed it and when, so a person who lost a race is told who won (rule 6).
func AlreadyClosed(op *Operation) *Error {
	return &Error{Code: ECONFLICT, Message: closedMessage(op), Closed: closureOf(op)}
}

func closureOf(op *Operation) *Closure {
	c := &Closure{Status: op.Status, ClosedBy: op.ClosedBy}
	if op.ClosedAt != nil {
		c.ClosedAt = *op.ClosedAt
	}
	return c
}

func closedMessage(op *Operation) string {
	at := ""
	if op.ClosedAt != nil {
		at = " at " + op.ClosedAt.UTC().Format(time.RFC3339)
	}
	by := op.ClosedBy
	if by == "" {
		by = "someone else"
	}
	return "Operation " + op.ID + " was already closed as " + string(op.Status) + " by " + by + at + "."
}

// Backoff returns how long to wait before attempt n (1-based) of a call: exponential with
// full jitter, never less than the provider's Retry-After.
func Backoff(n int, retryAfter time.Duration, lim Limits, r *rand.Rand) time.Duration {
	ceil := lim.BaseBackoff << max(n-1, 0)
	if ceil > lim.MaxBackoff || ceil <= 0 {
		ceil = lim.MaxBackoff
	}
	d := time.Duration(0)
	if ceil > 0 {
		if r != nil {
			d = time.Duration(r.Int64N(int64(ceil) + 1))
		} else {
			d = time.Duration(rand.Int64N(int64(ceil) + 1))
		}
	}
	if d < retryAfter {
		d = retryAfter
	}
	return d
}

// KeyInUseWait is how long to wait before sending again after the n-th (1-based) "key in
// use" answer of a call: at least a second, doubling up to Limits.KeyInUseMaxWait, never
// less than the provider's Retry-After. The provider is finishing an earlier send of the
// key, so hurrying buys nothing.
func KeyInUseWait(n int, retryAfter time.Duration, lim Limits) time.Duration {
	ceil := lim.KeyInUseMaxWait
	if ceil < time.Second {
		ceil = time.Second
	}
	d := time.Second << min(max(n-1, 0), 10)
	d = min(d, ceil)
	return max(d, retryAfter)
}

// Policy says how an operation treats an attempt whose outcome is uncertain. Each kind
// registers its default (KindSpec.Policy); an operation carries the one it was opened with.
type Policy struct {
	// RetryUncertain lets a timed-out attempt be sent again. True where the provider takes an
	// idempotency key (Stripe) or where a possible duplicate is accepted (interactive LLM
	// calls, counted); false for batch jobs, which wait for reconciliation.
	RetryUncertain bool
	// NoProviderKey says the provider takes no idempotency key (LLM APIs): a resend after an
	// uncertain attempt may execute twice, so it is recorded as a possible duplicate.
	NoProviderKey bool
	// HasLookup says the provider can be asked what became of an operation (Stripe lists
	// refunds by payment), so a failed close after an uncertain attempt needs a lookup.
	HasLookup bool
}

// NextStatus decides where an operation goes after an attempt ended with outcome. retry
// says whether another attempt may follow in this call; it is never true for a status other
// than in_progress.
func NextStatus(op *Operation, outcome Outcome, pol Policy, now time.Time, lim Limits) (next Status, retry bool) {
	switch outcome {
	case OutcomeOK:
		return StatusSucceeded, false
	case OutcomeInvalid:
		return StatusFailed, false
	case OutcomeServerError:
		// A saved 500 replays itself for this key: resending can only repeat it (rule 5).
		return StatusUnknown, false
	case OutcomeKeyInUse:
		// The provider is still running an earlier send with this key; a resend can only
		// replay its result, so waiting is no risk and spends no budget.
		if op.PastRetention(now) {
			return StatusExpired, false
		}
		return StatusInProgress, true
	}
	if outcome.Uncertain() && !pol.RetryUncertain {
		return StatusUnknown, false
	}
	if op.PastRetention(now) {
		return StatusExpired, false
	}
	if op.Sends() >= lim.AttemptsPerOperation {
		return StatusUnknown, false
	}
	return StatusInProgress, true
}
