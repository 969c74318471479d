package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Stored completions: a request with store: true is kept by the provider, with its
// metadata, and can be listed (filtered by metadata) and retrieved by id for a while, as
// OpenAI's stored chat completions can. A copy may become visible only some time after it
// was billed (store lag), which is what a lookup right after a timeout runs into.

// storeOptions are the fake's stored-completion settings.
type storeOptions struct {
	retention time.Duration
	lag       time.Duration
	refuse    bool
	// refuseWrites refuses store: true only; the list and retrieve routes still answer.
	refuseWrites bool
}

func newStoreOptions(o LLMOptions) storeOptions {
	s := storeOptions{retention: o.StoreRetention, lag: o.StoreLag, refuse: o.NoStore, refuseWrites: o.RefuseStoreWrites}
	if s.retention <= 0 {
		s.retention = 30 * 24 * time.Hour
	}
	return s
}

// storedCompletion is one completion the provider keeps.
type storedCompletion struct {
	id       string
	created  time.Time
	visible  time.Time
	model    string
	metadata map[string]string
	body     json.RawMessage
}

// The limits OpenAI sets on metadata.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// checkStore refuses, before anything is billed, a request whose store or metadata the
// fake does not accept: any of them when it has no stored completions, and metadata that
// is not a small map of strings otherwise. It returns the outcome to log, or "".
func (l *LLM) checkStore(w http.ResponseWriter, req chatRequest) string {
	hasMeta := len(req.Metadata) > 0 && string(req.Metadata) != "null"
	if l.store.refuse && (req.Store != nil || hasMeta) {
		param := "store"
		if req.Store == nil {
			param = "metadata"
		}
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Unrecognized request argument supplied: "+param)
		return "invalid"
	}
	if l.store.refuseWrites && req.Store != nil && *req.Store {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "",
			"Completions cannot be stored for an organization with zero data retention; remove store or set it to false.")
		return "invalid"
	}
	if !hasMeta {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal(req.Metadata, &m); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid type for 'metadata': expected an object.")
		return "invalid"
	}
	if len(m) > maxMetadataPairs {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most %d properties.", maxMetadataPairs))
		return "invalid"
	}
	for k, v := range m {
		s, ok := v.(string)
		if !ok || len(k) > maxMetadataKey || len(s) > maxMetadataValue {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("Invalid 'metadata.%s': keys are at most %d characters and values strings of at most %d.", k, maxMetadataKey, maxMetadataValue))
			return "invalid"
		}
	}
	return ""
}

func readMetadata(raw json.RawMessage) map[string]string {
	var m map[string]string
	_ = json.Unmarshal(raw, &m)
	return m
}

// keep stores a billed generation's completion; l.mu is held. Its copy becomes visible
// after the store lag: the fault's lag (a store_lag fault's delay) or the fake's.
func (l *LLM) keep(g Generation, choices []choice, fault *LLMFault) {
	lag := storeLag(l.store.lag, fault)
	msgs := make([]obj, len(choices))
	for i, c := range choices {
		msgs[i] = obj{"index": i, "message": messageObject(c), "logprobs": nil, "finish_reason": finishReason(c)}
	}
	meta := obj{}
	for k, v := range g.Metadata {
		meta[k] = v
	}
	body, _ := json.Marshal(obj{
		"id": g.ID, "object": "chat.completion", "created": g.Created.Unix(), "model": g.Model,
		"system_fingerprint": "fp_settle_fake", "service_tier": "default", "choices": msgs, "usage": usageObject(g),
		"metadata": meta, "request_id": g.RequestID,
	})
	l.stored = append(l.stored, &storedCompletion{id: g.ID, created: g.Created, visible: g.Created.Add(lag),
		model: g.Model, metadata: g.Metadata, body: body})
}

// storeLag is how long the provider's record of a request hit by fault takes to become
// visible: the rule's lag, a store_lag fault's delay, or else the fake's own lag.
func storeLag(lag time.Duration, fault *LLMFault) time.Duration {
	if fault != nil {
		switch {
		case fault.Lag > 0:
			return fault.Lag
		case fault.Kind == LLMFaultStoreLag:
			return fault.Delay
		}
	}
	return lag
}

// visibleStored returns the stored completions a reader sees now: past their lag and
// within the retention, oldest first.
func (l *LLM) visibleStored() []*storedCompletion {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*storedCompletion
	for _, s := range l.stored {
		if !now.Before(s.visible) && now.Before(s.created.Add(l.store.retention)) {
			out = append(out, s)
		}
	}
	return out
}

// listStored answers GET /v1/chat/completions as OpenAI does: metadata[key]=value filters
// (all must match), model, after (a completion id), limit 1..100 (default 20) and order asc
// (default) or desc; a list object with first_id, last_id and has_more.
func (l *LLM) listStored(w http.ResponseWriter, r *http.Request) {
	if !l.storeReadable(w, r) {
		return
	}
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "limit must be an integer between 1 and 100.")
			return
		}
		limit = n
	}
	order := firstOf(q.Get("order"), "asc")
	if order != "asc" && order != "desc" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "order must be asc or desc.")
		return
	}
	want := map[string]string{}
	for k, vs := range q {
		if len(k) > len("metadata[]") && k[:9] == "metadata[" && k[len(k)-1] == ']' && len(vs) > 0 {
			want[k[9:len(k)-1]] = vs[0]
		}
	}
	items := l.visibleStored()
	if order == "desc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	page, hasMore, ok := pageStored(items, want, q.Get("model"), q.Get("after"), limit)
	if !ok {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "", "No chat completion found with id '"+q.Get("after")+"'.")
		return
	}
	data := make([]rawJSON, len(page))
	first, last := any(nil), any(nil)
	for i, s := range page {
		data[i] = s.body
	}
	if len(page) > 0 {
		first, last = page[0].id, page[len(page)-1].id
	}
	writeJSON(w, http.StatusOK, obj{"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": hasMore})
}

// pageStored filters items and cuts the page after the cursor; ok is false when the cursor
// names no completion in the filtered list.
func pageStored(items []*storedCompletion, want map[string]string, model, after string, limit int) (page []*storedCompletion, hasMore, ok bool) {
	var kept []*storedCompletion
	for _, s := range items {
		match := model == "" || s.model == model
		for k, v := range want {
			match = match && s.metadata[k] == v
		}
		if match {
			kept = append(kept, s)
		}
	}
	if after != "" {
		i := 0
		for i < len(kept) && kept[i].id != after {
			i++
		}
		if i == len(kept) {
			return nil, false, false
		}
		kept = kept[i+1:]
	}
	if len(kept) > limit {
		return kept[:limit], true, true
	}
	return kept, false, true
}

// getStored answers GET /v1/chat/completions/{id}: the stored completion, or 404 when it
// was not stored, is not visible yet or has passed its retention.
func (l *LLM) getStored(w http.ResponseWriter, r *http.Request) {
	if !l.storeReadable(w, r) {
		return
	}
	id := r.PathValue("id")
	for _, s := range l.visibleStored() {
		if s.id == id {
			writeJSON(w, http.StatusOK, s.body)
			return
		}
	}
	openAIError(w, http.StatusNotFound, "invalid_request_error", "", "No chat completion found with id '"+id+"'.")
}

// storeReadable checks a read of the stored completions: an API key, and a fake that has
// them. It has answered when it returns false.
func (l *LLM) storeReadable(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := bearer(r); !ok {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return false
	}
	if l.store.refuse {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path))
		return false
	}
	return true
}
