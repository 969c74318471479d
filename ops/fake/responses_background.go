package fake

import (
	"context"
	"time"
)

// Background responses (background: true) as OpenAI runs them: the create call answers at
// once with the response queued (or, asked as a stream, with its events as they come), the
// generation runs behind the answer whoever still listens, and the stored response moves
// from queued to in_progress to its end, to be read at GET /v1/responses/{id} or streamed
// again from any sequence number with ?stream=true&starting_after=N.
//
// The fault rules strike a background response as a client of background mode meets them:
//
//   - bill_then_timeout on the create call: the response is created and billed, and the
//     create call still answers at once (its id is known), but the generation is held for
//     the rule's Delay (default 90 s), so the response stays queued past any wait of its
//     client; only then does it run to its end.
//   - drop_stream on the create call: as for any stream, the connection closes after
//     Chunk events; the response goes on to its end.
//   - a rule whose path is ResumePath strikes a stream read again by GET: drop_stream cuts it
//     after Chunk events, slow and bill_then_timeout wait the rule's Delay before its first.

// ResumePath is the path a fault rule names to strike the streams of GET
// /v1/responses/{id}?stream=true (a background response read again), and only those.
const ResumePath = "/v1/responses/{id}"

// backgroundHold is how long the generation of a background response waits before it
// starts: bill_then_timeout holds it rather than the create call's answer.
func backgroundHold(req responsesRequest, fault *LLMFault) time.Duration {
	if !req.Background || fault == nil || fault.Kind != LLMFaultBillThenTimeout {
		return 0
	}
	if fault.Delay <= 0 {
		return 90 * time.Second
	}
	return fault.Delay
}

// holdRun waits out the run's hold before its first step; false when the fake closed.
func (l *LLM) holdRun(run *responseRun) bool {
	return run.hold <= 0 || l.sleep(context.Background(), run.hold)
}

// resumeFault picks the fault rule, if any, that strikes a stream read again by GET: only
// rules naming ResumePath do, so a rule for every path keeps striking create calls only.
func (l *LLM) resumeFault() *LLMFault {
	return l.faults.pick(func(f LLMFault) bool { return f.Path == ResumePath }, LLMFault.timing)
}

// resumeDrop applies a resumed stream's fault: it waits a slow or bill_then_timeout rule's
// Delay and returns after how many events drop_stream cuts the stream (-1: never). ok is
// false when the wait was cut short.
func (l *LLM) resumeDrop(ctx context.Context) (dropAt int, ok bool) {
	f := l.resumeFault()
	switch {
	case f == nil:
		return -1, true
	case f.Kind == LLMFaultDropStream:
		return f.Chunk, true
	case f.Kind == LLMFaultSlow || f.Kind == LLMFaultBillThenTimeout:
		return -1, l.sleep(ctx, f.Delay)
	}
	return -1, true
}
