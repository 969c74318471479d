package fake

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// getResponse answers GET /v1/responses/{id}: the stored response as it is now (queued,
// in_progress, completed or failed), or 404 when it was not stored, is not visible yet or
// has passed its retention. With stream=true (in the query, or in a JSON body as the
// official SDKs send it) a background response's events are streamed again, those after
// starting_after first, then the live ones until it ends; a fault rule naming ResumePath
// strikes that stream.
func (l *LLM) getResponse(w http.ResponseWriter, r *http.Request) {
	if !l.storeReadable(w, r) {
		return
	}
	id := r.PathValue("id")
	run := l.visibleRun(id)
	if run == nil {
		writeJSON(w, http.StatusNotFound, obj{"error": obj{"message": "Response with id '" + id + "' not found.",
			"type": "invalid_request_error", "param": nil, "code": nil}})
		return
	}
	if !wantsStream(r) {
		writeJSON(w, http.StatusOK, run.snapshot())
		return
	}
	if !run.background {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "",
			"This response cannot be streamed because it was not created with background=true.")
		return
	}
	after := -1
	if v := r.URL.Query().Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'starting_after': expected a sequence number of 0 or more.")
			return
		}
		after = n
	}
	dropAt, ok := l.resumeDrop(r.Context())
	if !ok {
		return
	}
	l.streamRun(w, r, run, after, dropAt)
}

// visibleRun returns the stored response with id if a reader sees it now: past its store
// lag and within the retention.
func (l *LLM) visibleRun(id string) *responseRun {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	run := l.runs[id]
	if run == nil || now.Before(run.visible) || !now.Before(run.created.Add(l.store.retention)) {
		return nil
	}
	return run
}

// wantsStream reports whether a retrieve asks for a stream: stream=true in the query, or
// "stream": true in a JSON body.
func wantsStream(r *http.Request) bool {
	if v, err := strconv.ParseBool(r.URL.Query().Get("stream")); err == nil {
		return v
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	return json.Unmarshal(b, &body) == nil && body.Stream
}
