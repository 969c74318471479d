package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Background responses (background: true). The provider creates the response, answers the
// create call at once with it queued (or, asked as a stream, with its events as they come),
// generates it behind the answer whoever still listens, and keeps it: GET /v1/responses/{id}
// reads it as it is now, and GET /v1/responses/{id}?stream=true&starting_after=N streams its
// events again after sequence number N. A background request is admitted, fingerprinted
// (background included) and sent once like any other; what differs is that nothing needs to
// be generated twice once the provider named the response:
//
//   - The response id is recorded on the attempt as soon as the provider names it (the
//     create call's answer, or its stream's first event).
//   - The client gets what the provider gives: the queued response as JSON, at once, or the
//     events of the stream. The attempt then follows the response at the provider (a
//     stream of its events, resumed after the last one read) until it ends, so the
//     operation settles, with the cost of its usage, when the response reaches an end;
//     a queued or in_progress response is never taken for an answer.
//   - A stream the provider cut is resumed from the provider after the last sequence number
//     relayed, so the client's stream goes on, token-exact, without a second generation.
//     A stream that cannot be resumed ends the attempt uncertain, as any broken stream.
//   - A later attempt of the operation (the client's retry after an uncertain one) first
//     reads the response an earlier attempt recorded: one still running, or finished with
//     an answer, is followed or answered instead of being created again; only one that
//     failed, or that the provider does not hold, lets the request be sent again. One that
//     was cancelled is never created again: the cancel was someone's decision to stop it.
//   - A response cancelled while it is followed (POST /v1/responses/{id}/cancel, through
//     Settle or not) ends the attempt with error code response_cancelled, and the
//     operation settles from the cancelled response as a lookup closes it: failed, with
//     what the provider billed for it as its cost (responses_cancel.go).
//   - A retry with the key while the first request still follows the response, and the
//     client's own GET /v1/responses/{id} through Settle (Retrieve), are answered from the
//     provider's stored response; a GET that finds the response ended settles an operation
//     still open through the lookup of responses, as the desk and the reconciler do.
//
// A cut stream of a response created without background mode cannot be read again (the
// provider streams only background responses again); it keeps the rule of any cut stream.

// isBackground reports whether req is a Responses API request in background mode.
func isBackground(req *request) bool {
	if req == nil || req.api == nil || req.api.route() != responsesRoute {
		return false
	}
	var b bool
	return unmarshalField(req.fields, "background", &b) == nil && b
}

// responseState is what the gateway reads of a response's current state.
type responseState struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
}

func readState(body []byte) (responseState, bool) {
	var s responseState
	if json.Unmarshal(body, &s) != nil || s.ID == "" || s.Object != "response" {
		return s, false
	}
	return s, true
}

// running reports whether a response's status says the provider is still on it.
func running(status string) bool { return status == "queued" || status == "in_progress" }

// answeredStatus reports whether a response's status says it ended with an answer.
func answeredStatus(status string) bool {
	return status == responseCompleted || status == responseIncomplete
}

// The follow of a response gives up after followStrikes reads in a row that brought no new
// event (the provider cut them, or could not be asked), waiting followBackoff, doubled each
// time, between two reads; and at the gateway's Deadline in any case.
const (
	followStrikes = 3
	followBackoff = 100 * time.Millisecond
)

// eventTracker follows the events of one response across the streams that carry them: the
// last sequence number passed on (so a stream read again starts after it, and an event the
// provider sends again is not passed on twice), the response's id, and whether an event
// ended it.
type eventTracker struct {
	last  int
	seen  int
	id    string
	ended bool
	// stopped says the receiver refused an event: the follow ends.
	stopped bool
}

func newTracker(after int) *eventTracker { return &eventTracker{last: after} }

// wrap passes each new event to next and keeps count; next may be nil.
func (t *eventTracker) wrap(next func([]byte, bool) error) func([]byte, bool) error {
	return func(d []byte, _ bool) error {
		var ev struct {
			Type     string `json:"type"`
			Seq      *int   `json:"sequence_number"`
			Response *struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		_ = json.Unmarshal(d, &ev)
		if ev.Seq != nil {
			if *ev.Seq <= t.last {
				return nil // passed on already
			}
			t.last = *ev.Seq
		}
		if t.id == "" && ev.Response != nil {
			t.id = ev.Response.ID
		}
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			t.ended = true
		}
		t.seen++
		if next == nil {
			return nil
		}
		// Every event goes out as it came (more false): an event after it that was passed on
		// already is dropped above, and one held for it would wait for the provider.
		err := next(d, false)
		if err != nil && !errors.Is(err, ErrStreamFailed) {
			t.stopped = true
		}
		return err
	}
}

// readPath is the provider's path of response id, streamed after sequence number after
// (-1: from its first event) when stream is true.
func readPath(id string, stream bool, after int) string {
	p := "/responses/" + id
	switch {
	case !stream:
		return p
	case after < 0:
		return p + "?stream=true"
	}
	return p + "?stream=true&starting_after=" + strconv.Itoa(after)
}

// follow streams response id from the provider after t's last event, passing each new one
// to event, and reads it again after every cut until it ends, the follow gives up (see
// followStrikes), the provider refuses the read, or the deadline passes. It returns the
// last read's reply: ok when the response ended with the stream (whole says so), the
// provider's failure when it ended without an answer, or cut (the reply that cut the stream
// first; without one, the first read that failed) when it gave up.
func follow(ctx context.Context, up Upstream, deadline time.Time, c Call, id string, t *eventTracker, event func([]byte, bool) error, whole func() bool, cut Reply) Reply {
	strikes := 0
	for {
		seen := t.seen
		r := up.Send(ctx, Call{Method: http.MethodGet, Path: readPath(id, true, t.last), Stream: true,
			OperationID: c.OperationID, TenantID: c.TenantID, Attempt: c.Attempt, Event: t.wrap(event), Whole: whole})
		if r.Outcome == ops.OutcomeOK || r.ErrorCode == "upstream_stream_error" || t.stopped {
			return r
		}
		if cut.Outcome == "" {
			cut = r
		}
		if r.Outcome == ops.OutcomeInvalid {
			return cut // the provider refuses to stream it (not background, or not held): asking again changes nothing
		}
		if t.seen > seen {
			strikes = 0
		} else {
			strikes++
		}
		wait := followBackoff << max(strikes-1, 0)
		if strikes >= followStrikes || time.Now().Add(wait).After(deadline) || ops.SleepContext(ctx, wait) != nil {
			return cut
		}
	}
}

// backgroundUpstream sends the attempts of one background request (see above): it wraps the
// provider's Upstream for the exchange x.
type backgroundUpstream struct {
	x  *exchange
	up Upstream
	// earlier is the read of an earlier attempt's response made before this send
	// (onlyFollows), which the send goes on with.
	earlier *earlierRead
}

func (b *backgroundUpstream) Name() string { return b.up.Name() }

// Send creates the response, or goes on with the one an earlier attempt created, and
// follows it to its end.
func (b *backgroundUpstream) Send(ctx context.Context, c Call) Reply {
	if c.Attempt > 1 {
		if r, done := b.continueEarlier(ctx, c); done {
			return r
		}
	}
	t := newTracker(-1)
	post := c
	if c.Stream {
		post.Event = t.wrap(c.Event)
	}
	r := b.up.Send(ctx, post)
	if c.Stream {
		if r.Outcome == ops.OutcomeOK || !r.uncertain() || r.ErrorCode == "upstream_stream_error" || t.id == "" || t.stopped {
			return r
		}
		// The provider cut the stream of a response it goes on generating: read the rest.
		return b.withRequestID(b.ended(ctx, c, t.id, follow(ctx, b.up, b.deadline(), c, t.id, t, c.Event, c.Whole, r), t.ended), r.RequestID)
	}
	if r.Outcome != ops.OutcomeOK {
		return r
	}
	s, ok := readState(r.Body)
	if !ok || !running(s.Status) {
		return r // an answer, or not a response: the gateway reads it as any other
	}
	b.record(c, s.ID)
	b.x.answerNow(c.OperationID, r.RequestID, r.Body, false)
	return b.withRequestID(b.followQuietly(ctx, c, s.ID, -1, r), r.RequestID)
}

// deadline bounds the follow of one attempt.
func (b *backgroundUpstream) deadline() time.Time { return time.Now().Add(b.x.g.cfg.Deadline) }

// withRequestID gives a reply the request id of the call that created the response, which
// is what the operation records of the provider's request.
func (b *backgroundUpstream) withRequestID(r Reply, requestID string) Reply {
	if requestID != "" {
		r.RequestID = requestID
	}
	return r
}

// record records the response id on the attempt at once: whatever happens to the attempt,
// the response can be read by its id.
func (b *backgroundUpstream) record(c Call, id string) {
	x := b.x
	if x.g.cfg.Refs == nil {
		return
	}
	if err := x.g.cfg.Refs.RecordAttemptRef(context.WithoutCancel(x.ctx), c.OperationID, c.Attempt, id, true); err != nil {
		x.g.cfg.Logger.WarnContext(x.ctx, "record the id of a background response", "operation", c.OperationID, "attempt", c.Attempt, "ref", id, "err", err)
	}
}

// followQuietly follows response id for a client that asked for JSON and has had it: the
// events are read, not passed on, and the reply carries the response as it ended.
func (b *backgroundUpstream) followQuietly(ctx context.Context, c Call, id string, after int, cut Reply) Reply {
	asm := &responsesAssembler{}
	add := func(d []byte, _ bool) error {
		_, _, err := asm.add(d)
		return err
	}
	t := newTracker(after)
	r := follow(ctx, b.up, b.deadline(), c, id, t, add, asm.whole, cut)
	if r.Outcome == ops.OutcomeOK {
		r.Body = asm.final
	}
	return b.ended(ctx, c, id, r, asm.whole())
}

// ended is the reply of an attempt whose follow of response id ended with r, whole when an
// event ended the response: when the follow gave up and the provider says the response was
// cancelled, the attempt ends saying so rather than as a stream that broke off. Its outcome
// stays uncertain, since the provider billed what the response used before the cancel and
// only its record says how much: the lookup of responses settles the operation from it
// (Gateway.Cancel).
func (b *backgroundUpstream) ended(ctx context.Context, c Call, id string, r Reply, whole bool) Reply {
	if whole || r.ErrorCode == "upstream_stream_error" || id == "" {
		return r
	}
	now := b.up.Send(ctx, Call{Method: http.MethodGet, Path: readPath(id, false, 0), OperationID: c.OperationID, TenantID: c.TenantID, Attempt: c.Attempt})
	if s, ok := readState(now.Body); now.Outcome != ops.OutcomeOK || !ok || s.ID != id || s.Status != responseCancelled {
		return r
	}
	return Reply{Outcome: ops.OutcomeTimeout, HTTPStatus: r.HTTPStatus, RequestID: r.RequestID, ErrorCode: errResponseCancelled,
		Message: fmt.Sprintf("Response %s was cancelled before it ended.", id), Events: r.Events}
}

// errResponseCancelled is the error code of an attempt whose response was cancelled at the
// provider before it ended.
const errResponseCancelled = "response_cancelled"

// continueEarlier goes on with the response an earlier attempt of the operation recorded,
// when the provider still runs it or ended it with an answer, and ends the request when it
// was cancelled; done is false when the request is to be sent (the provider holds no such
// response, or it failed).
func (b *backgroundUpstream) continueEarlier(ctx context.Context, c Call) (Reply, bool) {
	x := b.x
	id, now, err := b.readEarlier(ctx, c)
	if err != nil {
		return Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "upstream_unreachable",
			Message: "The ids of this call's earlier responses could not be read; nothing was sent."}, true
	}
	if id == "" {
		return Reply{}, false
	}
	if now.Outcome != ops.OutcomeOK {
		if now.HTTPStatus == http.StatusNotFound {
			return Reply{}, false
		}
		// The provider could not say: sending again might generate a second response.
		return Reply{Outcome: ops.OutcomeNotSent, HTTPStatus: now.HTTPStatus, ErrorCode: "upstream_unreachable",
			Message: "The provider could not be asked for the response an earlier attempt created; nothing was sent."}, true
	}
	s, ok := readState(now.Body)
	switch {
	case !ok || s.ID != id:
		return Reply{Outcome: ops.OutcomeTimeout, HTTPStatus: now.HTTPStatus, RequestID: now.RequestID, ErrorCode: "upstream_bad_response",
			Message: "The provider's answer was not the response an earlier attempt created."}, true
	case s.Status == responseCancelled:
		// Someone stopped it on purpose: creating it again would undo the cancel and bill
		// a second generation (ops rule 3). This attempt sends nothing and ends the
		// request; the earlier, uncertain attempt leaves the operation unknown, to be
		// settled from the cancelled response as a lookup closes it.
		return Reply{Outcome: ops.OutcomeInvalid, HTTPStatus: now.HTTPStatus, RequestID: now.RequestID, ErrorCode: errResponseCancelled,
			Message: fmt.Sprintf("response %s, which an earlier attempt of this call created, was cancelled, so it is not created again.", id)}, true
	case !running(s.Status) && !answeredStatus(s.Status):
		return Reply{}, false // it ended without an answer: the request may be sent again
	case !c.Stream && !running(s.Status):
		return now, true
	case !c.Stream:
		x.answerNow(c.OperationID, now.RequestID, now.Body, true)
		return b.followQuietly(ctx, c, id, -1, Reply{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout", RequestID: now.RequestID}), true
	case running(s.Status):
		t := newTracker(-1)
		return b.ended(ctx, c, id, follow(ctx, b.up, b.deadline(), c, id, t, c.Event, c.Whole, Reply{}), t.ended), true
	}
	// Ended with an answer: its events are the stored response's, passed on as a replay's.
	evs, err := responsesAPI{}.replay(now.Body, x.req)
	if err != nil {
		return Reply{Outcome: ops.OutcomeTimeout, RequestID: now.RequestID, ErrorCode: "upstream_bad_response",
			Message: "The provider's stored response could not be read."}, true
	}
	for i, d := range evs {
		if err := c.Event(d, i < len(evs)-1); err != nil {
			return Reply{Outcome: ops.OutcomeTimeout, RequestID: now.RequestID, ErrorCode: "upstream_bad_response"}, true
		}
	}
	return Reply{Outcome: ops.OutcomeOK, HTTPStatus: http.StatusOK, RequestID: now.RequestID}, true
}

// lastResponseID is the response id the latest attempt of operation opID recorded, "" when
// none did (or nothing records them here).
func (x *exchange) lastResponseID(ctx context.Context, opID string) (string, error) {
	refs := x.lookups().refs()
	if refs == nil {
		return "", nil
	}
	m, err := refs.AttemptRefs(context.WithoutCancel(ctx), opID)
	if err != nil {
		return "", err
	}
	id, n := "", 0
	for k, ref := range m {
		if k > n {
			id, n = ref, k
		}
	}
	return id, nil
}

// answerNow gives a client that asked for JSON the response as the provider has it now
// (queued, in progress): all the client gets of this request. The connection closes after
// it, since the request goes on following the response.
func (x *exchange) answerNow(opID, requestID string, body []byte, replayed bool) {
	if x.began {
		return
	}
	if err := x.out.Begin(Head{OperationID: opID, ProviderRequestID: requestID, Length: len(body), Replayed: replayed, Close: true}); err != nil {
		x.gone = true
	}
	x.began = true
	x.write(body)
	x.gone = true // nothing more is written to this client
	x.following()
}

// inFlightBackground answers a retry of a background request whose first request is still
// following the response: from the provider's stored response, never by creating another.
// handled is false when the provider has not named the response yet (the key is answered as
// any key in flight) or could not be asked.
func (x *exchange) inFlightBackground(op *ops.Operation) (handled bool, err error) {
	if !isBackground(x.req) {
		return false, nil
	}
	if f := x.g.flights.get(op.ID); x.req.Stream && f != nil && f.stream {
		return false, nil // a stream this process relays: its retry follows it live
	}
	id, err := x.lastResponseID(x.ctx, op.ID)
	if err != nil || id == "" {
		return false, nil
	}
	up, bg := x.g.upstream(responsesRoute), context.WithoutCancel(x.ctx)
	c := Call{OperationID: op.ID, TenantID: op.TenantID, Attempt: op.Attempts}
	if !x.req.Stream {
		c.Method, c.Path = http.MethodGet, readPath(id, false, 0)
		now := up.Send(x.ctx, c)
		if now.Outcome != ops.OutcomeOK {
			return false, nil
		}
		if err := x.g.cfg.Ledger.Answer(bg, x.crID, ops.AnswerReplayed); err != nil {
			return true, err
		}
		x.g.stats.replays.Add(1)
		h := Head{Replayed: true, OperationID: op.ID, ProviderRequestID: now.RequestID, Length: len(now.Body)}
		if err := x.out.Begin(h); err == nil {
			x.began = true
			x.write(now.Body)
		}
		return true, nil
	}
	t := newTracker(-1)
	relay := func(d []byte, _ bool) error {
		x.relay(d, Head{Stream: true, Replayed: true, OperationID: op.ID})
		return nil
	}
	r := follow(x.ctx, up, time.Now().Add(x.g.cfg.Deadline), c, id, t, relay, func() bool { return t.ended }, Reply{})
	if !x.began {
		return false, nil
	}
	if err := x.g.cfg.Ledger.Answer(bg, x.crID, ops.AnswerReplayed); err != nil {
		return true, x.streamFailed(err)
	}
	x.g.stats.replays.Add(1)
	if r.Outcome != ops.OutcomeOK {
		return true, x.streamFailed(&ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonUpstreamError,
			Message: fmt.Sprintf("The provider's stream of response %s broke off; retry with the same key, or read it at GET /v1/responses/%s.", id, id)})
	}
	return true, nil
}

// relay sends one event of the provider's own stream to the client, beginning the answer
// with h if it has not begun.
func (x *exchange) relay(data []byte, h Head) {
	if !x.began {
		if err := x.out.Begin(h); err != nil {
			x.gone = true
		}
		x.began = true
	}
	x.write(x.api.appendFrame(nil, data))
}
