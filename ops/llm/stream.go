package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Streams that resume.
//
// Every event Settle relays from a provider's stream carries an SSE id, "A-N": event N (from
// 1) of the stream of the operation's attempt A. The numbering is the operation's, not the
// connection's: the client that started the stream, a retry following it live and a replay
// after it ended see each event under the same id. The events of a stream rebuilt from a
// stored answer (an answer that was not streamed, or found by a lookup) are numbered as
// attempt 0's. [DONE] and Settle's own error events carry no id.
//
// A client whose stream broke retries with the same Idempotency-Key, with Last-Event-ID set
// to the last id it read when it has one:
//
//   - While the generation still runs in this process, the retry follows it live, as a
//     request with Prefer: wait does, and is not told 409.
//   - While it runs in another replica, the retry cannot follow it there: it is told 409 with
//     Retry-After, as any request on a key in flight (or, with Prefer: wait, waits for it to
//     end and gets the stored events); its retry after the generation ended is a replay.
//   - Once it ended, the key replays the events stored with the answer (Result.Events),
//     byte for byte, with their ids.
//
// Either way the stream resumes after the event Last-Event-ID names, and the answer's
// Settle-Resumed-After header repeats that id. Without Last-Event-ID, or with one that names
// no event of this stream (another attempt's, whose stream broke off and was not the
// answer), the stream is sent from its first event and the header is absent: whatever the
// client read is not part of what it now receives, and it starts its answer over.
//
// A stream the provider cut is no stream that resumes here (but a background response's,
// which the attempt itself resumes from the provider: responses_background.go): the attempt
// ended without its answer, and whoever followed it got the events that came and then an
// error, never a closing event. Its retry is handled as any retry of an uncertain attempt (a
// lookup before any resend where the API has one; for Anthropic's messages, which have none,
// an error that says the stream cannot be completed, or a resend counted as a possible
// duplicate where the policy allows it), and the events of a resend are another attempt's.

// streamEvent is one event of a stream as Settle relays it: the provider's data, and where it
// stands among the operation's streams.
type streamEvent struct {
	attempt, n int
	data       []byte
}

// appendWithID appends frame to out with the event's id line put in, before its data line
// (after the event name of the APIs that send one, where their clients expect the name first).
func (e streamEvent) appendWithID(out, frame []byte) []byte {
	at := 0
	if !bytes.HasPrefix(frame, []byte("data:")) {
		at = bytes.Index(frame, []byte("\ndata:")) + 1
	}
	out = append(append(out, frame[:at]...), "id: "...)
	out = append(strconv.AppendInt(out, int64(e.attempt), 10), '-')
	out = append(strconv.AppendInt(out, int64(e.n), 10), '\n')
	return append(out, frame[at:]...)
}

// resumeFrom returns the index of evs a stream resumes from for a client whose Last-Event-ID
// is last, and the id it resumes after: the event after the one last names, or the first
// event ("" after) when last names none of evs.
func resumeFrom(evs []streamEvent, last string) (int, string) {
	a, n, ok := strings.Cut(last, "-")
	attempt, err1 := strconv.Atoi(a)
	num, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return 0, ""
	}
	for i, e := range evs {
		if e.attempt == attempt && e.n == num {
			return i + 1, last
		}
	}
	return 0, ""
}

// encodeEvents is how an operation stores the events of its answer's stream:
// {"attempt":A,"events":[data,...]}, each event's data as it was relayed, event N at index
// N-1. It is nil when there are none, or when an event is not JSON and the document could
// not hold it as it came: a replay then rebuilds the stream from the answer.
func encodeEvents(evs []streamEvent) json.RawMessage {
	if len(evs) == 0 {
		return nil
	}
	size := 32
	for _, e := range evs {
		if !json.Valid(e.data) {
			return nil
		}
		size += len(e.data) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(evs[0].attempt), 10)
	b = append(b, `,"events":[`...)
	for i, e := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.data...)
	}
	return append(b, "]}"...)
}

// decodeEvents reads the events an operation stored (encodeEvents); nil when it stored none.
func decodeEvents(doc []byte) ([]streamEvent, error) {
	if len(doc) == 0 {
		return nil, nil
	}
	var d struct {
		Attempt int               `json:"attempt"`
		Events  []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode the events of a stream: %w", err)
	}
	evs := make([]streamEvent, len(d.Events))
	for i, data := range d.Events {
		evs[i] = streamEvent{attempt: d.Attempt, n: i + 1, data: data}
	}
	return evs, nil
}

// StoredStreams reads the events stored with an operation's answer (Result.Events), for a
// replay to send them again; nil when it stored none. ops/pg implements it.
type StoredStreams interface {
	StreamEvents(ctx context.Context, opID string) ([]byte, error)
}

// replayStream answers a streaming request from op's stored answer: the events of the stream
// that delivered it, or, where none are kept, the events the API rebuilds from the answer,
// resumed after the client's Last-Event-ID.
func (x *exchange) replayStream(op *ops.Operation, h Head) error {
	evs := x.storedStream(op)
	if evs == nil {
		data, err := x.api.replay(op.Result, x.req)
		if err != nil {
			return &ops.Error{Code: ops.EINTERNAL, Message: "Internal error.", Err: fmt.Errorf("replay operation %s: %w", op.ID, err)}
		}
		evs = make([]streamEvent, len(data))
		for i, d := range data {
			evs[i] = streamEvent{n: i + 1, data: d}
		}
	}
	from, after := resumeFrom(evs, x.lastEvent)
	h.ResumedAfter = after
	x.begin(h)
	evs = evs[from:]
	for i, ev := range evs {
		x.forward(ev, !x.req.IncludeUsage && x.api.usageOnly(ev.data), h, i < len(evs)-1)
	}
	x.end(x.api.done())
	return nil
}

// storedStream returns the events stored with op's answer, nil when there are none or they
// cannot be read (the answer itself, already read, is then replayed as rebuilt events).
func (x *exchange) storedStream(op *ops.Operation) []streamEvent {
	s := x.g.cfg.Streams
	if s == nil {
		return nil
	}
	doc, err := s.StreamEvents(context.WithoutCancel(x.ctx), op.ID)
	var evs []streamEvent
	if err == nil {
		evs, err = decodeEvents(doc)
	}
	if err != nil {
		x.g.cfg.Logger.WarnContext(x.ctx, "read the stored events of a stream; replaying it rebuilt from its answer", "operation", op.ID, "err", err)
		return nil
	}
	return evs
}

// follow streams the generation f, running in this process, to a streaming client live: after
// the event its Last-Event-ID names, or from the first event, then ends it the way the first
// request's stream ends. timeout, when set (Prefer: wait), bounds the wait for the stream to
// begin; busy answers it then.
func (x *exchange) follow(f *flight, timeout <-chan time.Time, applied string, busy func() error) error {
	g := x.g
	evs, _, _ := f.since(0)
	next, after := resumeFrom(evs, x.lastEvent)
	h := Head{Stream: true, Replayed: true, OperationID: f.opID, PreferenceApplied: applied, ResumedAfter: after}
	for {
		evs, done, changed := f.since(next)
		for i, ev := range evs {
			h.ProviderRequestID = f.requestID()
			x.forward(ev, !x.req.IncludeUsage && x.api.usageOnly(ev.data), h, i < len(evs)-1)
		}
		next += len(evs)
		if done {
			break
		}
		var expired <-chan time.Time
		if !x.began {
			expired = timeout // once the stream began, it is followed to its end
		}
		select {
		case <-changed:
		case <-expired:
			return busy()
		case <-x.ctx.Done():
			return x.ctx.Err()
		}
	}
	cur, err := g.cfg.Ledger.Get(context.WithoutCancel(x.ctx), f.opID)
	if err != nil {
		return x.streamFailed(err)
	}
	g.stats.waited.Add(1)
	if cur.Status != ops.StatusSucceeded {
		if !x.began {
			x.wait = 0
			return x.readmit(cur)
		}
		return x.streamFailed(g.endedWithout(x.ctx, cur))
	}
	if err := g.cfg.Ledger.Answer(context.WithoutCancel(x.ctx), x.crID, ops.AnswerReplayed); err != nil {
		return x.streamFailed(err)
	}
	g.stats.replays.Add(1)
	if !x.began {
		// Nothing was sent yet (the first request did not stream, or the client had read
		// every event): the stored answer, resumed after Last-Event-ID.
		return x.replay(cur, applied)
	}
	x.end(x.api.done())
	return nil
}

// endedWithout is the error that ends a followed stream whose generation ended without an
// answer: what the client of the first request was told, in the words of the operation's
// status now.
func (g *Gateway) endedWithout(ctx context.Context, op *ops.Operation) error {
	if op.Status == ops.StatusUnknown || op.Status == ops.StatusExpired {
		return g.unknownError(ctx, op)
	}
	msg := fmt.Sprintf("The generation this stream followed ended before its answer was whole (operation %s is %s).", op.ID, op.Status)
	if op.Status == ops.StatusInProgress {
		msg += " Retrying with the same key goes on with it."
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonUpstreamError, Message: msg}
}

// hub holds the generations this process is running, so a request on the same key (a
// streaming retry, or one with Prefer: wait) can follow one live.
type hub struct {
	mu      sync.Mutex
	flights map[string]*flight
}

func newHub() *hub { return &hub{flights: map[string]*flight{}} }

// flight is one running generation as its followers see it: the events of its stream so far.
type flight struct {
	opID   string
	stream bool
	done   chan struct{}

	mu     sync.Mutex
	events []streamEvent
	// changed is closed at the next change, made when a follower asks for it (since): a
	// stream nobody follows makes no channel per event.
	changed chan struct{}
	reqID   string
	// answered says its client had the whole answer before the close was written.
	answered atomic.Bool
}

func (h *hub) open(opID string, stream bool) *flight {
	f := &flight{opID: opID, stream: stream, done: make(chan struct{})}
	h.mu.Lock()
	h.flights[opID] = f
	h.mu.Unlock()
	return f
}

func (h *hub) get(opID string) *flight {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.flights[opID]
}

// close ends a flight: its followers wake and read the outcome from the store.
func (h *hub) close(f *flight) {
	h.mu.Lock()
	if h.flights[f.opID] == f {
		delete(h.flights, f.opID)
	}
	h.mu.Unlock()
	f.mu.Lock()
	select {
	case <-f.done:
	default:
		close(f.done)
		f.wake()
	}
	f.mu.Unlock()
}

// add appends an event; its data is the flight's to keep (llm.Call.Event).
func (f *flight) add(ev streamEvent) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.wake()
	f.mu.Unlock()
}

// wake tells the followers waiting on changed; f.mu is held.
func (f *flight) wake() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// recorded is the events of attempt's stream as the operation stores them with its answer.
func (f *flight) recorded(attempt int) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The attempts of a flight run one after another, so an attempt's events are the tail
	// from its first: they are encoded where they lie, without a copy, when they are.
	from := 0
	for from < len(f.events) && f.events[from].attempt != attempt {
		from++
	}
	tail := f.events[from:]
	if !slices.ContainsFunc(tail, func(e streamEvent) bool { return e.attempt != attempt }) {
		return encodeEvents(tail)
	}
	var evs []streamEvent
	for _, e := range tail {
		if e.attempt == attempt {
			evs = append(evs, e)
		}
	}
	return encodeEvents(evs)
}

func (f *flight) setRequestID(id string) {
	f.mu.Lock()
	f.reqID = id
	f.mu.Unlock()
}

func (f *flight) requestID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqID
}

// since returns the events from index i on, whether the flight ended, and a channel closed
// at the next change.
func (f *flight) since(i int) ([]streamEvent, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs []streamEvent
	if i < len(f.events) {
		evs = f.events[i:len(f.events):len(f.events)]
	}
	select {
	case <-f.done:
		return evs, true, closedChan
	default:
	}
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return evs, false, f.changed
}

// closedChan is the change channel of a flight that ended: there is nothing to wait for.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
