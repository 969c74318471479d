package ops

import (
	"context"
	"time"
)

// Refuse records a client request refused before any operation was opened (malformed, not
// allowed), so every client request is counted (rule 8), and returns what its client is
// answered: refusal, or the outage when the database could not be reached to record it
// (unrecorded). The answer is decided where the refusal is recorded, so that no path can
// record one and answer as if it had.
func (l *Ledger) Refuse(ctx context.Context, tenantID int64, kind Kind, requestRef string, refusal error) error {
	err := l.recordRejected(ctx, tenantID, kind, requestRef)
	if err != nil && !Unreachable(err) {
		l.logger().ErrorContext(ctx, "record refused request", "kind", kind, "err", err)
	}
	return unrecorded(refusal, err)
}

// rejectWait bounds the recording of a refused request once its caller's context is done.
const rejectWait = 5 * time.Second

// recordRejected records a refused request on a context of its own: a request refused
// because its deadline ran out (a Stripe read slower than the call) was still made, and is
// counted whether or not its caller still waits (rule 8).
func (l *Ledger) recordRejected(ctx context.Context, tenantID int64, kind Kind, requestRef string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rejectWait)
	defer cancel()
	return l.store.RecordRejected(ctx, tenantID, kind, requestRef, l.Clock.Now())
}
