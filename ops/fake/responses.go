package fake

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The Responses API (POST /v1/responses) of the fake OpenAI. Like chat completions it takes
// no idempotency key and bills every request that reaches generation. A response is stored
// unless the request says store: false, so GET /v1/responses/{id} finds it; one created with
// background: true starts queued, is generated behind the answer, and its events can be
// streamed again from any sequence number while it runs and after.

// responsesRequest is the part of a Responses API request the fake reads and echoes.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	Background         bool            `json:"background"`
	Metadata           json.RawMessage `json:"metadata"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
}

// createResponse answers POST /v1/responses as OpenAI does, with the faults set on the fake
// striking before, during or after generation.
func (l *LLM) createResponse(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newID("req_")
	w.Header().Set("x-request-id", reqID)
	outcome := "generated"
	var fault *LLMFault
	defer func() { l.logCall(APIResponses, reqID, start, outcome, fault) }()
	key, body, req, stored, refused := l.readResponsesRequest(w, r)
	if refused != "" {
		outcome = refused
		return
	}
	fault = l.pickFault(r.URL.Path)
	if !l.sleep(r.Context(), time.Duration(l.latency.Load())) {
		outcome = "gone"
		return
	}
	breaksRun := breaksStream(fault) && (req.Stream || req.Background)
	if fault != nil && !breaksRun {
		if o := l.failBeforeGenerating(w, r, fault); o != "" {
			outcome = o
			return
		}
	}

	// Generation: from here on the request is billed.
	run := l.startRun(r, req, body, reqID, key, stored, fault, breaksRun)
	w.Header().Set("openai-processing-ms", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	// A background response is answered at once; its generation is what a fault holds.
	if run.hold > 0 {
		outcome = "fault"
	} else if !holdBilled(l.sleep, w, r, fault, &outcome) {
		return
	}
	dropAt := -1
	if fault != nil && fault.Kind == LLMFaultDropStream {
		dropAt = fault.Chunk
	}
	switch {
	case req.Stream:
		outcome = l.streamRun(w, r, run, -1, dropAt)
	case dropAt >= 0:
		outcome = "fault"
		dropConnection(w)
	case req.Background:
		writeJSON(w, http.StatusOK, run.first)
	default:
		outcome = l.answerWhenDone(w, r, run)
	}
}

// breaksStream reports whether fault, on a stream, fails the generation part-way (billed)
// rather than refusing the request before anything is billed.
func breaksStream(fault *LLMFault) bool {
	return fault != nil && fault.Chunk > 0 && (fault.Kind == LLMFaultServerError || fault.Kind == LLMFaultOverloaded)
}

// readResponsesRequest reads and checks a Responses API request the way OpenAI refuses bad
// ones: before anything is billed. stored says whether the response will be kept. On a
// refusal it has answered, and it returns the outcome to log; "" means the request goes on.
func (l *LLM) readResponsesRequest(w http.ResponseWriter, r *http.Request) (key string, body []byte, req responsesRequest, stored bool, refused string) {
	key, ok := bearer(r)
	if !ok {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer ...'.")
		return key, nil, req, false, "unauthorized"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return key, body, req, false, "bad_json"
	}
	invalid := func(param, msg string) (string, []byte, responsesRequest, bool, string) {
		writeJSON(w, http.StatusBadRequest, obj{"error": obj{"message": msg, "type": "invalid_request_error", "param": param, "code": nil}})
		return key, body, req, false, "invalid"
	}
	// A Responses API request stores its response unless it says otherwise; a provider
	// without stored responses, or with zero data retention, keeps none.
	stored = !l.store.refuse && !l.store.refuseWrites
	if req.Store != nil {
		stored = *req.Store
	}
	switch {
	case req.Model == "":
		return invalid("model", "Missing required parameter: 'model'.")
	case emptyInput(req.Input):
		return invalid("input", "Missing required parameter: 'input'.")
	case req.MaxOutputTokens != nil && *req.MaxOutputTokens < 16:
		return invalid("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16.")
	}
	if refused := l.checkStore(w, chatRequest{Store: req.Store, Metadata: req.Metadata}); refused != "" {
		return key, body, req, false, refused
	}
	if req.Background && !stored {
		return invalid("background", "Background mode requires the response to be stored; remove store: false.")
	}
	return key, body, req, stored, ""
}

// emptyInput reports whether a request's input is missing, an empty string or an empty list.
func emptyInput(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == ""
	}
	var items []json.RawMessage
	return json.Unmarshal(raw, &items) != nil || len(items) == 0
}

// responsesMessages lays the instructions and the input out as chat messages, for counting
// prompt tokens and recognising a repeated prompt.
func responsesMessages(req responsesRequest) []json.RawMessage {
	var msgs []json.RawMessage
	if req.Instructions != nil {
		b, _ := json.Marshal(obj{"role": "system", "content": *req.Instructions})
		msgs = append(msgs, b)
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		b, _ := json.Marshal(obj{"role": "user", "content": s})
		return append(msgs, b)
	}
	var items []json.RawMessage
	_ = json.Unmarshal(req.Input, &items)
	return append(msgs, items...)
}

// responsesForcedTool returns the function the request forces a call of: the named one, or
// the first function tool when tool_choice is "required". "" means the model answers in text.
func responsesForcedTool(req responsesRequest) string {
	var tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(req.Tools, &tools)
	var names []string
	for _, t := range tools {
		if t.Type == "function" && t.Name != "" {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 || len(req.ToolChoice) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(req.ToolChoice, &s) == nil {
		if s == "required" {
			return names[0]
		}
		return ""
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(req.ToolChoice, &named) == nil && named.Type == "function" {
		return named.Name
	}
	return ""
}

// responsesSeed is the content seed of a Responses API request: background, like the
// transport and storage fields, does not change the answer.
func responsesSeed(body []byte) uint64 {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	delete(m, "background")
	b, _ := json.Marshal(m)
	return contentSeed(b)
}

// holdBilled plays bill_then_timeout on a billed request of either fake LLM: the answer
// waits for the fault's delay (default 90 s, past any client's timeout) by sleep. It returns
// false when the wait was cut short; the connection is then dropped unanswered.
func holdBilled(sleep func(context.Context, time.Duration) bool, w http.ResponseWriter, r *http.Request, fault *LLMFault, outcome *string) bool {
	if fault == nil || fault.Kind != LLMFaultBillThenTimeout {
		return true
	}
	*outcome = "fault"
	d := fault.Delay
	if d <= 0 {
		d = 90 * time.Second
	}
	if !sleep(r.Context(), d) {
		dropConnection(w)
		return false
	}
	return true
}

// logCall writes the one line per request of the Responses and embeddings routes.
func (l *LLM) logCall(api LLMAPI, reqID string, start time.Time, outcome string, fault *LLMFault) {
	attrs := []any{"api", string(api), "request_id", reqID, "outcome", outcome, "dur", time.Since(start)}
	if fault != nil {
		attrs = append(attrs, "fault", string(fault.Kind))
	}
	l.log.Info("fake llm request", attrs...)
}
