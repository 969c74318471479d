package ops

import (
	"context"
	"time"
)

// Reject records a client request refused before any operation was opened (malformed,
// not allowed), so every client request is counted (rule 8).
func (l *Ledger) Reject(ctx context.Context, tenantID int64, kind Kind, requestRef string) error {
	return l.recordRejected(ctx, tenantID, kind, requestRef)
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
