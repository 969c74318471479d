package llm

import (
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// replay answers from the operation's stored result: as JSON, or as an SSE stream
// (replayStream).
func (x *exchange) replay(op *ops.Operation, applied string) error {
	h := Head{Stream: x.req.Stream, Replayed: true, OperationID: op.ID, ProviderRequestID: op.ProviderRequestID, PreferenceApplied: applied}
	if op.PurgedAt != nil {
		return purgedError(op)
	}
	if len(op.Result) == 0 {
		// Closed as succeeded by a person whose completion Settle could not fetch: the
		// answer exists at the provider, not here, and asking again would bill again.
		return &ops.Error{Code: ops.ENOTFOUND, Reason: ReasonAnswerNotStored,
			Message: fmt.Sprintf("The request with this key was answered by the provider (%s, operation %s), but Settle does not have the answer to replay. Ask again with a new Idempotency-Key.", op.ProviderRef, op.ID)}
	}
	if !x.req.Stream {
		h.Length = len(op.Result)
		if err := x.out.Begin(h); err != nil {
			return nil // the client left
		}
		x.began = true
		x.write(op.Result)
		return nil
	}
	return x.replayStream(op, h)
}

// forward sends one stream event to the client with its id, beginning the response if
// needed. The final usage chunk (usageOnly) goes only to clients that asked for usage. more
// says the provider's next event is in hand (Call.Event): the event is held to go out with
// it, and one sent without more sends what was held with it.
func (x *exchange) forward(ev streamEvent, usageOnly bool, h Head, more bool) {
	if usageOnly && !x.req.IncludeUsage {
		if !more {
			x.release()
		}
		return
	}
	x.begin(h)
	// The frames are built in the exchange's own buffers: a Sink keeps nothing it is given.
	x.frame = x.api.appendFrame(x.frame[:0], ev.data)
	x.framed = ev.appendWithID(x.framed[:0], x.frame)
	if more {
		x.hold(x.framed)
		return
	}
	x.write(x.framed)
}

// begin begins the response with h unless it began.
func (x *exchange) begin(h Head) {
	if x.began {
		return
	}
	if err := x.out.Begin(h); err != nil {
		x.gone = true
	}
	x.began = true
}

// write sends p to the client, with whatever was held before it.
func (x *exchange) write(p []byte) {
	if x.gone {
		return
	}
	if len(p) == 0 {
		x.release()
		return
	}
	x.held = false
	if err := x.out.Write(p); err != nil {
		x.gone = true
	}
}

// hold writes p to go to the client with the next write, where the Sink can hold it (see
// HoldingSink); any other Sink sends it at once.
func (x *exchange) hold(p []byte) {
	hs, ok := x.out.(HoldingSink)
	if !ok {
		x.write(p)
		return
	}
	if x.gone {
		return
	}
	x.held = true
	if err := hs.Hold(p); err != nil {
		x.gone = true
	}
}

// release sends what was held, if anything: the stream is about to wait, or to end.
func (x *exchange) release() {
	if !x.held || x.gone {
		return
	}
	x.held = false
	if err := x.out.(HoldingSink).Flush(); err != nil {
		x.gone = true
	}
}

// end writes a stream's closing part p, with whatever was held: where the Sink can
// (EndingSink), it goes with the end of the response as the request returns, in one send
// with what closes the body; any other Sink sends it at once. Nothing is written after it.
func (x *exchange) end(p []byte) {
	es, ok := x.out.(EndingSink)
	if !ok {
		x.write(p)
		return
	}
	if x.gone {
		return
	}
	x.held = false
	if err := es.End(p); err != nil {
		x.gone = true
	}
}

// streamFailed ends a stream that began with the API's error event, as the providers do,
// and without its closing event.
func (x *exchange) streamFailed(err error) error {
	x.write(x.api.streamError(err))
	x.g.cfg.Logger.WarnContext(x.ctx, "llm stream ended with an error", "err", err)
	return nil
}
