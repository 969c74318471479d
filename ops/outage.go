package ops

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// When Settle's own database cannot be reached (stopped, restarting, failing over, cut off),
// a call answers EUNAVAILABLE, which tells its client to try again in a few seconds, and
// says what Settle knows of the provider (rule 12). A call that met the outage before it sent
// anything says it sent nothing, so the same call again is safe. A call that met it after
// sending says the provider may have run it: its answer could not be recorded, and the
// operation's lease, once it runs out, lets a retry with the same key or the reaper go on
// with it.

const (
	// ReasonDatabaseUnavailable is the reason of the store's error for a statement that could
	// not reach the database, and of a flow's answer to a call that met such an error before
	// it sent anything (NothingSent).
	ReasonDatabaseUnavailable = "database_unavailable"
	// ReasonOutcomeUnrecorded is the reason of the answer to a call that met an outage after
	// it sent its request to the provider (MayHaveRun): the provider may have run it.
	ReasonOutcomeUnrecorded = "outcome_unrecorded"
)

// RetryAfterUnavailable is how long a client is asked to wait before it calls again after an
// EUNAVAILABLE answer: a database restart or a failover takes seconds.
const RetryAfterUnavailable = 5 * time.Second

// DatabaseUnreachable is the store's error for a statement that could not reach the
// database. The statement may or may not have taken effect (a commit whose answer was cut
// off), so its message promises nothing either way.
func DatabaseUnreachable(cause error) *Error {
	return &Error{Code: EUNAVAILABLE, Reason: ReasonDatabaseUnavailable,
		Message: "Settle's database cannot be reached right now; try again in a few seconds.", Err: cause}
}

// unrecorded is the answer to a request refused before any operation was opened, given
// what recording the refusal returned. A refusal the database was unreachable to record is
// answered as that outage, not as the refusal: a client told its request was refused would
// not send it again, and rule 8 wants it recorded, which its next try will be. Any other
// failure to record is joined to the refusal, which stays the answer.
func unrecorded(refusal, recordErr error) error {
	switch {
	case recordErr == nil:
		return refusal
	case Unreachable(recordErr):
		return recordErr
	}
	return errors.Join(refusal, recordErr)
}

// Unreachable reports whether err holds, anywhere in its chain, an outage of Settle's
// database: the store's error or a flow's answer to it.
func Unreachable(err error) bool { return outageIn(err) != nil }

func outageIn(err error) *Error {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return nil
		}
		if e.Reason == ReasonDatabaseUnavailable || e.Reason == ReasonOutcomeUnrecorded {
			return e
		}
		err = e.Err
	}
	return nil
}

// NothingSent is a flow's answer to a call that met an outage of the database before it sent
// anything to the provider: "this call sent nothing", which is what Settle knows, not that
// nothing happened. retry tells the client how to call again. An error that is no outage,
// or one met after a send, is returned as it is.
func NothingSent(err error, retry string) error {
	if e := outageIn(err); e == nil || e.Reason == ReasonOutcomeUnrecorded {
		return err
	}
	return &Error{Code: EUNAVAILABLE, Reason: ReasonDatabaseUnavailable, Err: err,
		Message: "Settle's database cannot be reached right now, so this call stopped before sending anything: it sent nothing to the provider. " + retry}
}

// MayHaveRun is a flow's answer to a call that met an outage of the database after it sent
// its request to the provider: the provider may have run it, and what it answered is not
// recorded. next tells the client what a retry does. An error that is no outage is
// returned as it is.
func MayHaveRun(err error, next string) error {
	if !Unreachable(err) {
		return err
	}
	return &Error{Code: EUNAVAILABLE, Reason: ReasonOutcomeUnrecorded, Err: err,
		Message: "This call sent its request to the provider, but Settle's database could not be reached to record the answer: the provider may have run it. " + next}
}

// OutageLog keeps a background loop's log to one line when the database becomes unreachable
// and one when it answers again, instead of a line for every pass that fails meanwhile. The
// zero value is ready to use; it is safe for concurrent use.
type OutageLog struct {
	mu   sync.Mutex
	down bool
}

// Pass is told how each pass of the loop ended (err is nil for one that worked) and
// reports whether it took care of err: an outage is logged when it starts, and the first
// pass after it that meets none logs that the database answers again. Any other error is
// the caller's to log.
func (o *OutageLog) Pass(log *slog.Logger, loop string, err error) bool {
	out := Unreachable(err)
	o.mu.Lock()
	was := o.down
	o.down = out
	o.mu.Unlock()
	switch {
	case out && !was:
		log.Warn("database unreachable, retrying", "loop", loop, "err", err)
	case !out && was:
		log.Info("database reachable again", "loop", loop)
	}
	return out
}
