package fake

import (
	"net/http"
	"strings"
	"time"
)

// Cancelling a background response, as OpenAI's POST /v1/responses/{id}/cancel does: only a
// response created with background: true can be cancelled. One still queued or in progress
// stops where it is: no event is generated after the cancel, the streams that follow it end,
// and it is kept with status cancelled. It is billed for what it used: the prompt and the
// output tokens generated so far once it left the queue, nothing while it was still queued
// (its usage is then null). Cancelling a cancelled response again answers it as it is; one
// that ended otherwise, or that was created without background mode, is refused with 400;
// an id the fake does not hold is 404.

// Cancels returns the response ids of every cancel the fake was asked for, whatever it
// answered, in the order they came.
func (l *LLM) Cancels() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cancels...)
}

// cancelResponse answers POST /v1/responses/{id}/cancel.
func (l *LLM) cancelResponse(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newID("req_")
	w.Header().Set("x-request-id", reqID)
	outcome := "cancelled"
	defer func() { l.logCall(APIResponses, reqID, start, outcome, nil) }()
	if !l.storeReadable(w, r) {
		outcome = "refused"
		return
	}
	id := r.PathValue("id")
	l.mu.Lock()
	l.cancels = append(l.cancels, id)
	l.mu.Unlock()
	run := l.visibleRun(id)
	switch {
	case run == nil:
		outcome = "not_found"
		writeJSON(w, http.StatusNotFound, obj{"error": obj{"message": "Response with id '" + id + "' not found.",
			"type": "invalid_request_error", "param": nil, "code": nil}})
		return
	case !run.background:
		outcome = "refused"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Only responses created with background=true can be cancelled.")
		return
	}
	o, status := run.cancel()
	if o == nil {
		outcome = "refused"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Cannot cancel a "+status+" response.")
		return
	}
	if status != "" {
		l.bill(run.gen.ID, o)
	}
	writeJSON(w, http.StatusOK, o)
}

// cancel stops the run unless it ended: it returns the cancelled response and the status the
// run was cancelled in (queued or in_progress; "" when it was cancelled already, so nothing
// changed). A run that ended otherwise is not cancelled: the response is nil and the status
// is the one it ended in.
func (run *responseRun) cancel() (obj, string) {
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.done {
		if run.status == "cancelled" {
			return run.final, ""
		}
		return nil, run.status
	}
	was := run.status
	o := run.object("cancelled")
	if was != "queued" {
		out := 0
		for _, e := range run.events {
			if strings.HasSuffix(e.typ, ".delta") {
				out++
			}
		}
		g := run.gen
		g.CompletionTokens = out
		o["usage"] = responsesUsage(g)
	}
	run.status, run.final, run.done = "cancelled", o, true
	close(run.wake)
	run.wake = make(chan struct{})
	return o, was
}

// over reports whether the run ended (completed, failed or cancelled).
func (run *responseRun) over() bool {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.done
}

// bill sets the generation of response id to what its cancelled response o says it used:
// the tokens of its usage, none when it had none.
func (l *LLM) bill(id string, o obj) {
	in, out, cached := 0, 0, 0
	if u, ok := o["usage"].(obj); ok {
		in, out = u["input_tokens"].(int), u["output_tokens"].(int)
		cached = u["input_tokens_details"].(obj)["cached_tokens"].(int)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.generations {
		if g := &l.generations[i]; g.ID == id {
			g.PromptTokens, g.CompletionTokens, g.CachedTokens = in, out, cached
		}
	}
}
