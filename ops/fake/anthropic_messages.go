package fake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// messagesRequest is the part of a Messages API request the fake reads.
type messagesRequest struct {
	Model     string            `json:"model"`
	MaxTokens *int              `json:"max_tokens"`
	Messages  []json.RawMessage `json:"messages"`
	System    json.RawMessage   `json:"system"`
	Stream    bool              `json:"stream"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Metadata map[string]json.RawMessage `json:"metadata"`
	// CacheControl at the top marks the whole prompt as a cache breakpoint.
	CacheControl *cacheControl `json:"cache_control"`
}

// cacheControl marks a cache breakpoint; TTL is "5m" (the default) or "1h".
type cacheControl struct {
	TTL string `json:"ttl"`
}

func (c cacheControl) lifetime() time.Duration {
	if c.TTL == "1h" {
		return time.Hour
	}
	return 5 * time.Minute
}

// messages answers POST /v1/messages as Anthropic does, with the faults set on the fake
// striking before, during or after generation.
func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newID("req_")
	w.Header().Set("request-id", reqID)
	outcome := "generated"
	var fault *LLMFault
	defer func() {
		attrs := []any{"request_id", reqID, "outcome", outcome, "dur", time.Since(start)}
		if fault != nil {
			attrs = append(attrs, "fault", string(fault.Kind))
		}
		a.log.Info("fake anthropic request", attrs...)
	}()
	key, body, req, refused := a.readMessagesRequest(w, r)
	if refused != "" {
		outcome = refused
		return
	}
	fault = a.pickFault(r.URL.Path)
	if !a.srv.sleep(r.Context(), time.Duration(a.latency.Load())) {
		outcome = "gone"
		return
	}
	breaks := breaksStream(fault) && req.Stream
	if fault != nil && !breaks {
		if o := a.failBeforeGenerating(w, r, fault); o != "" {
			outcome = o
			return
		}
	}

	// Generation: from here on the request is billed.
	g, c := a.generate(r, req, body, reqID, key, fault)
	if !holdBilled(a.srv.sleep, w, r, fault, &outcome) {
		return
	}
	if req.Stream {
		outcome = a.stream(w, r, g, c, fault)
		return
	}
	if fault != nil && fault.Kind == LLMFaultDropStream {
		outcome = "fault"
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusOK, anthropicMessage(g, c, true))
}

// readMessagesRequest reads and checks a request the way Anthropic refuses bad ones: before
// anything is billed. On a refusal it has answered, and it returns the outcome to log; ""
// means the request goes on.
func (a *Anthropic) readMessagesRequest(w http.ResponseWriter, r *http.Request) (key string, body []byte, req messagesRequest, refused string) {
	key, ok := anthropicKey(r)
	switch {
	case !ok:
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return key, nil, req, "unauthorized"
	case a.isAdminKey(key):
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key: an Admin API key cannot create messages")
		return key, nil, req, "unauthorized"
	case r.Header.Get("Anthropic-Version") == "":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return key, nil, req, "invalid"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "There was an error parsing the body of your request as JSON.")
		return key, body, req, "bad_json"
	}
	msg := ""
	switch {
	case req.Model == "":
		msg = "model: Field required"
	case req.MaxTokens == nil:
		msg = "max_tokens: Field required"
	case *req.MaxTokens < 1:
		msg = "max_tokens: Input should be greater than or equal to 1"
	case len(req.Messages) == 0:
		msg = "messages: at least one message is required"
	}
	for k := range req.Metadata {
		if k != "user_id" {
			msg = "metadata." + k + ": Extra inputs are not permitted"
		}
	}
	if msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return key, body, req, "invalid"
	}
	return key, body, req, ""
}

// failBeforeGenerating plays the faults that strike before generation, so nothing is
// billed: it answers and returns the outcome to log, or returns "" for the request to go on
// (after the delay of a slow fault).
func (a *Anthropic) failBeforeGenerating(w http.ResponseWriter, r *http.Request, fault *LLMFault) string {
	h := w.Header()
	switch fault.Kind {
	case LLMFaultRateLimit:
		retry := max(fault.RetryAfter, 1)
		h.Set("Retry-After", strconv.Itoa(retry))
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		anthropicError(w, http.StatusTooManyRequests, "rate_limit_error", "Number of requests has exceeded your per-minute rate limit. Please try again later.")
		return "fault"
	case LLMFaultServerError:
		anthropicError(w, http.StatusInternalServerError, "api_error", "Internal server error")
		return "fault"
	case LLMFaultOverloaded:
		anthropicError(w, 529, "overloaded_error", "Overloaded")
		return "fault"
	case LLMFaultGarbage:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		return "fault"
	case LLMFaultSlow:
		if !a.srv.sleep(r.Context(), fault.Delay) {
			return "gone"
		}
	}
	return ""
}

// generate generates the request's answer and records the billed generation, with the
// prompt cache read and written as the request's cache_control breakpoints ask.
func (a *Anthropic) generate(r *http.Request, req messagesRequest, body []byte, reqID, key string, fault *LLMFault) (AnthropicGeneration, choice) {
	now := a.clock()
	words, stop := a.words, "end_turn"
	if *req.MaxTokens < words {
		words, stop = *req.MaxTokens, "max_tokens"
	}
	tool := anthropicForcedTool(req)
	if tool != "" {
		stop = "tool_use"
	}
	c := generate(contentSeed(body), words, tool)
	g := AnthropicGeneration{ID: newID("msg_"), RequestID: reqID, APIKeyID: AnthropicKeyID(key), Model: req.Model,
		Stream: req.Stream, OutputTokens: len(c.tokens), StopReason: stop, Created: now, Content: c.content,
		AnthropicVersion: r.Header.Get("Anthropic-Version"), AnthropicBeta: r.Header.Get("Anthropic-Beta"),
		reported: now.Add(storeLag(a.reportLag, fault))}
	if tool != "" {
		g.Content = c.toolArgs
	}
	if fault != nil {
		g.Fault = string(fault.Kind)
	}
	p := countAnthropicPrompt(req)
	g.InputTokens = p.total - p.prefix
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.prefix > 0 {
		slot := g.APIKeyID + "/" + req.Model + "/" + p.hash
		if until, ok := a.cache[slot]; ok && now.Before(until) {
			g.CacheReadInputTokens = p.prefix
		} else {
			g.CacheCreationInputTokens = p.prefix
			if p.ttl > 5*time.Minute {
				g.CacheCreation1hInputTokens = p.prefix
			}
		}
		a.cache[slot] = now.Add(p.ttl)
	}
	a.generations = append(a.generations, g)
	return g, c
}

// anthropicForcedTool returns the tool the request forces a call of: the named one, or the
// first tool when tool_choice is "any". "" means the model answers in text.
func anthropicForcedTool(req messagesRequest) string {
	if len(req.Tools) == 0 || req.ToolChoice == nil {
		return ""
	}
	switch req.ToolChoice.Type {
	case "tool":
		return req.ToolChoice.Name
	case "any":
		return req.Tools[0].Name
	}
	return ""
}

// promptCount is what the prompt cache sees of a request: its tokens, and the tokens, hash
// and lifetime of its prefix up to the last cache_control breakpoint (none: prefix 0).
type promptCount struct {
	total, prefix int
	hash          string
	ttl           time.Duration
}

// countAnthropicPrompt walks the system prompt, then the messages, block by block, counting
// a token a word plus a few per message, as the fake OpenAI does. Anthropic's smallest
// cacheable prefix (about a thousand tokens) is not enforced.
func countAnthropicPrompt(req messagesRequest) promptCount {
	p := promptCount{total: 3}
	h := sha256.New()
	walk := func(blocks []json.RawMessage) {
		for _, raw := range blocks {
			var b struct {
				Text         string          `json:"text"`
				Content      json.RawMessage `json:"content"`
				CacheControl *cacheControl   `json:"cache_control"`
			}
			_ = json.Unmarshal(raw, &b)
			p.total += len(strings.Fields(b.Text)) + len(strings.Fields(textOf(b.Content)))
			h.Write(raw)
			if b.CacheControl != nil {
				p.prefix, p.hash, p.ttl = p.total, hex.EncodeToString(h.Sum(nil)[:12]), b.CacheControl.lifetime()
			}
		}
	}
	walk(blocksOf(req.System))
	for _, raw := range req.Messages {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &m)
		p.total += 4
		walk(blocksOf(m.Content))
	}
	if req.CacheControl != nil {
		p.prefix, p.hash, p.ttl = p.total, hex.EncodeToString(h.Sum(nil)[:12]), req.CacheControl.lifetime()
	}
	return p
}

// blocksOf reads content given as a string or as a list of blocks, as a list of blocks.
func blocksOf(raw json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(obj{"type": "text", "text": s})
		return []json.RawMessage{b}
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(raw, &blocks)
	return blocks
}

// textOf is the text of a tool result's content, a string or a list of text blocks.
func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		var t struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(b, &t)
		parts = append(parts, t.Text)
	}
	return strings.Join(parts, " ")
}
