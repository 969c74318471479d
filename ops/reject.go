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
	return l.RefuseAs(ctx, RequestParams{TenantID: tenantID, Kind: kind, RequestRef: requestRef, Answer: AnswerRejected}, refusal)
}

// rejectWait bounds the recording of a refused request once its caller's context is done.
const rejectWait = 5 * time.Second

// recordRefused records a request refused with refusal on a context of its own: a request
// refused because its deadline ran out (a Stripe read slower than the call) was still made,
// and is counted whether or not its caller still waits (rule 8). The row says why
// (ErrorReason), so that a tenant stopped by its budget is told from malformed requests.
func (l *Ledger) recordRefused(ctx context.Context, p RequestParams, refusal error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rejectWait)
	defer cancel()
	p.Reason = ErrorReason(refusal)
	_, err := l.store.RecordRequest(ctx, p, l.Clock.Now())
	return err
}

// AnswerRefused answers client request id, recorded when it was admitted, as refused with
// refusal (a resend held back after admission), recording why as Refuse does (rule 8).
func (l *Ledger) AnswerRefused(ctx context.Context, id int64, refusal error) error {
	return l.store.RefuseClientRequest(ctx, id, ErrorReason(refusal), l.Clock.Now())
}

// RecordRequest records a client request about an operation that opens, joins and sends
// none of it (a cancel of the response it created): one of its client's requests (rule 8),
// counted as neither a new intent nor a duplicate. It returns the request's id, which
// Answer answers once its outcome is known.
func (l *Ledger) RecordRequest(ctx context.Context, p RequestParams) (int64, error) {
	return l.store.RecordRequest(ctx, p, l.Clock.Now())
}

// RefuseAs is Refuse for a request recorded as p says, p.Answer its refusal's own answer (a
// cancel refused is told apart from a call refused).
func (l *Ledger) RefuseAs(ctx context.Context, p RequestParams, refusal error) error {
	err := l.recordRefused(ctx, p, refusal)
	if err != nil && !Unreachable(err) {
		l.logger().ErrorContext(ctx, "record refused request", "kind", p.Kind, "answer", p.Answer, "err", err)
	}
	return unrecorded(refusal, err)
}
