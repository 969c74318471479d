package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// responseRun is one response of the Responses API as the fake generates it: the events it
// streams, in order and numbered from 0, and the state a retrieve shows. Every run is
// generated to its end, whoever still listens, so a stored response completes even when
// its stream was cut.
type responseRun struct {
	gen    Generation
	req    responsesRequest
	out    choice
	itemID string
	// cites are the annotations of the answer's text: the file a code_interpreter run
	// wrote in its container, as OpenAI cites it (sandboxCitations).
	cites      []obj
	created    time.Time
	visible    time.Time
	stored     bool
	background bool
	// paced runs wait the fake's chunk delay between events, as a stream or a background
	// response does; a plain request is answered at once.
	paced bool
	// failAt is how many events the run sends before a fault breaks it off (-1: never);
	// failKind is that fault.
	failAt   int
	failKind LLMFaultKind
	// first is the response as created, which a background request is answered with.
	first obj
	// hold is how long a background run waits before its first step (backgroundHold).
	hold time.Duration

	mu     sync.Mutex
	status string
	events []runEvent
	// wake is closed and replaced at every new event, waking the streams that wait.
	wake  chan struct{}
	done  bool
	final obj
}

// runEvent is one server-sent event of a run; its data carries sequence_number seq.
type runEvent struct {
	typ  string
	seq  int
	data []byte
}

// startRun bills the request, records its generation and starts generating the response.
// The run is stored (retrievable by id) when stored is true.
func (l *LLM) startRun(r *http.Request, req responsesRequest, body []byte, reqID, key string, stored bool, fault *LLMFault, breaks bool) *responseRun {
	now := l.clock()
	words := l.words
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens > 0 {
		words = min(*req.MaxOutputTokens, 4096)
	}
	c := generate(responsesSeed(body), words, responsesForcedTool(req))
	msgs := responsesMessages(req)
	g := Generation{
		ID: newID("resp_"), API: APIResponses, RequestID: reqID, APIKeyID: LLMKeyID(key),
		ClientRequestID: r.Header.Get("X-Client-Request-Id"), Model: req.Model, Stream: req.Stream,
		PromptTokens: countPromptTokens(msgs), CompletionTokens: len(c.tokens), Created: now, Content: c.content,
		Stored: stored, Metadata: readMetadata(req.Metadata),
	}
	if req.MaxOutputTokens != nil {
		g.MaxOutputTokens = *req.MaxOutputTokens
	}
	if fault != nil {
		g.Fault = string(fault.Kind)
	}
	run := &responseRun{req: req, out: c, itemID: newID("msg_"), created: now, visible: now.Add(storeLag(l.store.lag, fault)),
		stored: stored, background: req.Background, paced: req.Stream || req.Background, failAt: -1,
		status: "in_progress", wake: make(chan struct{})}
	if c.toolName != "" {
		run.itemID = newID("fc_")
	}
	run.cites = sandboxCitations(req.Tools, len(c.content))
	if breaks {
		run.failAt, run.failKind = fault.Chunk, fault.Kind
	}
	if req.Background {
		run.status = "queued"
		run.hold = backgroundHold(req, fault)
	}
	promptHash := g.APIKeyID + "/" + hashMessages(req.Model, msgs)
	l.mu.Lock()
	if l.prompts[promptHash] {
		g.CachedTokens = g.PromptTokens &^ 15
	}
	l.prompts[promptHash] = true
	run.gen = g
	l.generations = append(l.generations, g)
	if stored {
		l.runs[g.ID] = run
	}
	l.mu.Unlock()
	run.first = run.object(run.status)
	run.emit("response.created", obj{"response": run.first})
	go l.produce(run)
	return run
}

// produce sends the run's events after response.created, pausing between them when the run
// is paced, until the response is complete or a fault breaks it off. Close stops it.
func (l *LLM) produce(run *responseRun) {
	if !l.holdRun(run) {
		return
	}
	for _, step := range run.steps() {
		if run.over() {
			return // cancelled: nothing more is generated
		}
		if run.paced && !l.sleep(context.Background(), time.Duration(l.chunkDelay.Load())) {
			return
		}
		if run.failAt >= 0 && run.sent() >= run.failAt {
			run.fail()
			return
		}
		step()
	}
}

// emit appends one event to the run and wakes its listeners.
func (run *responseRun) emit(typ string, o obj) { run.push(typ, o, "", nil) }

// push appends one event and, in the same step, moves the run to status (unless "") and,
// given its final response, ends it, so no listener sees the end before the last event.
// A run that ended (cancelled while a step was under way) takes no event more.
func (run *responseRun) push(typ string, o obj, status string, final obj) {
	o["type"] = typ
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.done {
		return
	}
	o["sequence_number"] = len(run.events)
	b, _ := json.Marshal(o)
	run.events = append(run.events, runEvent{typ: typ, seq: len(run.events), data: b})
	if status != "" {
		run.status = status
	}
	if final != nil {
		run.final, run.done = final, true
	}
	close(run.wake)
	run.wake = make(chan struct{})
}

// sent is how many events the run has sent.
func (run *responseRun) sent() int {
	run.mu.Lock()
	defer run.mu.Unlock()
	return len(run.events)
}

// fail breaks the run off as OpenAI reports a failure mid-stream: an error event, then
// response.failed with the response, which is stored as failed.
func (run *responseRun) fail() {
	code, msg := "server_error", "The server had an error while processing your request. Sorry about that!"
	if run.failKind == LLMFaultOverloaded {
		msg = "The engine is currently overloaded, please try again later."
	}
	run.emit("error", obj{"code": code, "message": msg, "param": nil})
	o := run.object("failed")
	o["error"] = obj{"code": code, "message": msg}
	o["usage"] = responsesUsage(run.gen)
	run.push("response.failed", obj{"response": o}, "failed", o)
}

// since returns the events after sequence number after, whether the run is over, and a
// channel closed when another event arrives.
func (run *responseRun) since(after int) ([]runEvent, bool, <-chan struct{}) {
	run.mu.Lock()
	defer run.mu.Unlock()
	from := min(max(after+1, 0), len(run.events))
	return run.events[from:], run.done, run.wake
}

// snapshot is the response as a retrieve shows it now.
func (run *responseRun) snapshot() obj {
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.final != nil {
		return run.final
	}
	return run.object(run.status)
}

// streamRun writes the run's events after sequence number after as server-sent events, then
// the live ones until the run is over. With dropAt ≥ 0 it drops the connection after that
// many events. It returns the outcome to log.
func (l *LLM) streamRun(w http.ResponseWriter, r *http.Request, run *responseRun, after, dropAt int) string {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sent := 0
	for {
		evs, done, wake := run.since(after)
		for _, e := range evs {
			if sent == dropAt {
				dropConnection(w)
				return "fault"
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.typ, e.data); err != nil {
				return "client_gone"
			}
			_ = rc.Flush()
			sent, after = sent+1, e.seq
		}
		if done {
			if sent == dropAt {
				dropConnection(w)
				return "fault"
			}
			if run.snapshot()["status"] == "failed" {
				return "fault"
			}
			return "generated"
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return "client_gone"
		case <-l.done:
			return "gone"
		}
	}
}

// answerWhenDone answers a plain request with the response once it is complete.
func (l *LLM) answerWhenDone(w http.ResponseWriter, r *http.Request, run *responseRun) string {
	for {
		_, done, wake := run.since(1 << 30)
		if done {
			writeJSON(w, http.StatusOK, run.snapshot())
			return "generated"
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return "client_gone"
		case <-l.done:
			return "gone"
		}
	}
}
