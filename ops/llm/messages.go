package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// MessagesRoute is the route of Anthropic's Messages API, which a gateway serves only with
// a provider for it in Config.Upstreams.
const MessagesRoute = "/v1/messages"

// DefaultAnthropicVersion is the anthropic-version header a Messages API request is sent
// with when its client sent none: the version Anthropic's API documents as its stable one.
const DefaultAnthropicVersion = "2023-06-01"

// messagesAPI is POST /v1/messages, Anthropic's Messages API: a message as JSON, or a
// stream of typed events (message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta, message_stop, with ping between them and error when the
// provider fails) that ends with message_stop and no [DONE]. Anthropic names the message
// (msg_…) in the first event, before anything is generated, so every attempt's message id is
// recorded at once, even when the stream breaks later.
//
// Anthropic takes no idempotency key and has no way to read a message again: an attempt
// whose answer was lost cannot be looked up, and a stream it cut cannot be finished or
// fetched. Only a person, from Anthropic's usage report or console, closes such a call. The
// reconciler compares that report with Settle's calls minute by minute (ops/recon's
// PromptTokenReport) and names the call when its minute billed its prompt, but the report's
// sums name no message, so it closes none.
//
// Every field is fingerprinted (model, messages, system, max_tokens, temperature, top_p,
// top_k, stop_sequences, tools, tool_choice, thinking, service_tier and any other) but
// stream, which changes only how the answer travels, and metadata, whose one field is
// user_id: an end-user id for Anthropic's abuse detection, which changes neither the
// message nor its price (under the user key scope it is part of the key's scope instead,
// as a chat completion's user is). So are the anthropic-version and anthropic-beta headers,
// which the provider is sent as the client sent them: a beta or a version changes what is
// generated and what it costs.
type messagesAPI struct{}

func (messagesAPI) route() string { return MessagesRoute }
func (messagesAPI) path() string  { return MessagesRoute }
func (messagesAPI) noun() string  { return "message" }
func (messagesAPI) differs() string {
	return "model, messages, system, parameters or the anthropic-version or anthropic-beta header differ, or it went to another route"
}

// check wants messages and a positive max_tokens, as Anthropic does, so a request it would
// refuse is refused before an operation is opened; it reads the stream flag, the end user
// of metadata.user_id, and the headers passed to the provider.
func (messagesAPI) check(req *request) error {
	invalid := func(msg string) error {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: msg}
	}
	if !nonEmptyArray(req.fields["messages"]) {
		return invalid("messages must be a non-empty array.")
	}
	var maxTokens float64
	if err := unmarshalField(req.fields, "max_tokens", &maxTokens); err != nil || maxTokens < 1 || maxTokens != math.Trunc(maxTokens) {
		return invalid("max_tokens must be a positive whole number.")
	}
	if err := unmarshalField(req.fields, "stream", &req.Stream); err != nil {
		return invalid("stream must be true or false.")
	}
	// A message's usage travels in its own events: there is nothing to ask for.
	req.IncludeUsage = true
	var meta struct {
		UserID string `json:"user_id"`
	}
	if err := unmarshalField(req.fields, "metadata", &meta); err != nil {
		return invalid("metadata must be an object whose user_id is a string.")
	}
	req.User = meta.UserID
	version := strings.TrimSpace(req.header("anthropic-version"))
	if version == "" {
		version = DefaultAnthropicVersion
	}
	if err := ops.CheckRef("anthropic-version", version, 64); err != nil {
		return err
	}
	req.headers = map[string]string{"anthropic-version": version}
	beta := betas(req.header("anthropic-beta"))
	if err := ops.CheckRef("anthropic-beta", beta, 1024); err != nil {
		return err
	}
	if beta != "" {
		req.headers["anthropic-beta"] = beta
	}
	return nil
}

// betas is the anthropic-beta header in one form: its betas sorted, without spaces or
// repeats, since their order and spelling do not change what they turn on.
func betas(h string) string {
	var list []string
	for _, b := range strings.Split(h, ",") {
		if b = strings.TrimSpace(b); b != "" {
			list = append(list, b)
		}
	}
	slices.Sort(list)
	return strings.Join(slices.Compact(list), ",")
}

func (messagesAPI) excluded(name string) bool { return name == "stream" || name == "metadata" }

func (messagesAPI) upstreamBody(_ *request, original []byte) []byte { return original }

func (messagesAPI) assembler() streamAssembler { return &messagesAssembler{} }

func (messagesAPI) parseAnswer(body []byte) (answer, error) { return parseMessage(body) }

func (messagesAPI) usageOnly([]byte) bool { return false }

// appendFrame writes an event as the Messages API does: its type as the event name.
func (messagesAPI) appendFrame(b, data []byte) []byte { return appendTypedSSE(b, data) }

func (messagesAPI) done() []byte { return nil }

// streamError is the Messages API's error event, with Settle's reason as its error_code.
func (messagesAPI) streamError(err error) []byte {
	return typedSSE(AnthropicError(AnthropicErrorType(err), ops.ErrorMessage(err), ops.ErrorReason(err)))
}

// AnthropicError is an error in the Messages API's shape, as its clients read it:
// {"type":"error","error":{"type":…,"message":…,"details":{"error_code":…}}}, code being
// Settle's stable code of the error.
func AnthropicError(typ, message, code string) []byte {
	e := map[string]any{"type": typ, "message": message}
	if code != "" {
		e["details"] = map[string]string{"error_code": code}
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": e})
	return b
}

// AnthropicErrorType is the Messages API's error type of a failure that ends a stream.
func AnthropicErrorType(err error) string {
	switch ops.ErrorReason(err) {
	case ReasonRateLimited:
		return "rate_limit_error"
	case ReasonTimeout:
		return "timeout_error"
	}
	return "api_error"
}

// anthropicMessage is what the gateway reads of a message.
type anthropicMessage struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	StopReason *string         `json:"stop_reason"`
	Content    json.RawMessage `json:"content"`
	Usage      *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		CacheCreation            *struct {
			Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
	} `json:"usage"`
}

// parseMessage reads a finished message: one with an id, its content and a stop reason. Its
// input tokens are counted apart from the tokens written to and read from the prompt cache,
// which are billed at their own prices: the prompt is all three.
func parseMessage(body []byte) (answer, error) {
	var m anthropicMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return answer{}, fmt.Errorf("decode message: %w", err)
	}
	switch {
	case m.ID == "" || m.Type != "message":
		return answer{}, fmt.Errorf("not a message")
	case len(m.Content) == 0 || m.Content[0] != '[':
		return answer{}, fmt.Errorf("message %s without content", m.ID)
	case m.StopReason == nil:
		return answer{}, fmt.Errorf("message %s without a stop reason is not finished", m.ID)
	}
	a := answer{body: body, id: m.ID, model: m.Model}
	if u := m.Usage; u != nil {
		a.usage = Usage{PromptTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
			CompletionTokens: u.OutputTokens, CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
		if u.CacheCreation != nil {
			a.usage.CacheWrite1hTokens = min(u.CacheCreation.Ephemeral1h, u.CacheCreationInputTokens)
		}
		a.usage.TotalTokens = a.usage.PromptTokens + u.OutputTokens
	}
	return a, nil
}

// messagesAssembler rebuilds a message from its stream: the message as message_start began
// it, each content block from its start and deltas, and the stop reason and usage of
// message_delta; message_stop makes it whole. An error event ends the attempt: the provider
// says the generation failed, after billing what it generated. Event types it does not know
// (Anthropic may add some) are passed on and left out of the message.
type messagesAssembler struct {
	msg     map[string]json.RawMessage
	usage   map[string]json.RawMessage
	blocks  []*contentBlock
	stopped bool
	events  int
}

// contentBlock is one block of a streamed message: the fields it started with, and what its
// deltas added.
type contentBlock struct {
	fields    map[string]json.RawMessage
	text      map[string]*strings.Builder // text, thinking and signature, by field
	input     []byte
	citations []json.RawMessage
}

func (a *messagesAssembler) add(data []byte) (token, usageOnly bool, err error) {
	var ev struct {
		Type         string                     `json:"type"`
		Index        int                        `json:"index"`
		Message      map[string]json.RawMessage `json:"message"`
		ContentBlock map[string]json.RawMessage `json:"content_block"`
		Delta        map[string]json.RawMessage `json:"delta"`
		Usage        map[string]json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
		return false, false, fmt.Errorf("event %d is not a message event", a.events+1)
	}
	a.events++
	if a.msg == nil && ev.Type != "message_start" && ev.Type != "ping" && ev.Type != "error" {
		return false, false, fmt.Errorf("event %d (%s) comes before message_start", a.events, ev.Type)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message == nil || a.msg != nil {
			return false, false, fmt.Errorf("event %d: a message_start without a message, or a second one", a.events)
		}
		a.msg = ev.Message
		a.usage = map[string]json.RawMessage{}
		_ = json.Unmarshal(ev.Message["usage"], &a.usage)
	case "content_block_start":
		if ev.Index != len(a.blocks) || ev.ContentBlock == nil {
			return false, false, fmt.Errorf("event %d starts block %d after %d blocks", a.events, ev.Index, len(a.blocks))
		}
		a.blocks = append(a.blocks, &contentBlock{fields: ev.ContentBlock, text: map[string]*strings.Builder{}})
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= len(a.blocks) {
			return false, false, fmt.Errorf("event %d adds to block %d of %d", a.events, ev.Index, len(a.blocks))
		}
		return a.blocks[ev.Index].add(ev.Delta), false, nil
	case "message_delta":
		for k, v := range ev.Delta {
			a.msg[k] = v
		}
		// Every count of message_delta's usage is the message's whole count so far.
		for k, v := range ev.Usage {
			a.usage[k] = v
		}
	case "message_stop":
		a.stopped = true
	case "error":
		return false, false, fmt.Errorf("%w (%s)", ErrStreamFailed, ev.Type)
	}
	return false, false, nil
}

// add applies one delta to the block; it reports whether the delta carried output.
func (b *contentBlock) add(delta map[string]json.RawMessage) bool {
	var typ, s string
	_ = json.Unmarshal(delta["type"], &typ)
	appendTo := func(field, key string) bool {
		if json.Unmarshal(delta[key], &s) != nil {
			return false
		}
		w := b.text[field]
		if w == nil {
			w = &strings.Builder{}
			b.text[field] = w
		}
		w.WriteString(s)
		return true
	}
	switch typ {
	case "text_delta":
		return appendTo("text", "text")
	case "thinking_delta":
		return appendTo("thinking", "thinking")
	case "signature_delta":
		appendTo("signature", "signature") // a signature is no output of the model
	case "input_json_delta":
		if json.Unmarshal(delta["partial_json"], &s) != nil {
			return false
		}
		b.input = append(b.input, s...)
		return true
	case "citations_delta":
		if c, ok := delta["citation"]; ok {
			b.citations = append(b.citations, c)
		}
	}
	return false
}

// block is the block as a whole message holds it.
func (b *contentBlock) block() (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(b.fields)+1)
	for k, v := range b.fields {
		out[k] = v
	}
	for field, w := range b.text {
		var start string
		_ = json.Unmarshal(out[field], &start)
		out[field], _ = json.Marshal(start + w.String())
	}
	if len(b.input) > 0 {
		if !json.Valid(b.input) {
			return nil, fmt.Errorf("a tool call's input is not JSON")
		}
		out["input"] = json.RawMessage(b.input)
	}
	if len(b.citations) > 0 {
		var list []json.RawMessage
		_ = json.Unmarshal(out["citations"], &list)
		out["citations"], _ = json.Marshal(append(list, b.citations...))
	}
	return out, nil
}

func (a *messagesAssembler) whole() bool { return a.stopped }

func (a *messagesAssembler) id() string {
	var id string
	if a.msg != nil {
		_ = json.Unmarshal(a.msg["id"], &id)
	}
	return id
}

func (a *messagesAssembler) answer() (answer, error) {
	if a.msg == nil || !a.stopped {
		return answer{}, fmt.Errorf("stream without its message_stop")
	}
	m := make(map[string]json.RawMessage, len(a.msg))
	for k, v := range a.msg {
		m[k] = v
	}
	content := make([]map[string]json.RawMessage, 0, len(a.blocks))
	for _, b := range a.blocks {
		blk, err := b.block()
		if err != nil {
			return answer{}, err
		}
		content = append(content, blk)
	}
	var err error
	if m["content"], err = json.Marshal(content); err != nil {
		return answer{}, err
	}
	if m["usage"], err = json.Marshal(a.usage); err != nil {
		return answer{}, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return answer{}, err
	}
	return parseMessage(body)
}

// replay turns a stored message back into the events of its stream, as the Messages API
// sends them: message_start with the message as it began (no content, no stop reason), per
// content block its start, its text, thinking, signature, citations or tool input in one delta
// each, and its stop, then message_delta with the stop reason and the whole usage, and
// message_stop.
func (messagesAPI) replay(stored []byte, _ *request) ([][]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(stored, &msg); err != nil {
		return nil, fmt.Errorf("decode stored message: %w", err)
	}
	var content []map[string]json.RawMessage
	if err := json.Unmarshal(msg["content"], &content); err != nil {
		return nil, fmt.Errorf("decode stored content: %w", err)
	}
	var out [][]byte
	var ferr error
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		b, err := json.Marshal(fields)
		if err != nil && ferr == nil {
			ferr = err
		}
		out = append(out, b)
	}
	begun := make(map[string]json.RawMessage, len(msg))
	delta := map[string]json.RawMessage{}
	for k, v := range msg {
		switch k {
		case "stop_reason", "stop_sequence", "stop_details", "container":
			// What message_delta says at the end.
			delta[k] = v
			begun[k] = json.RawMessage("null")
		default:
			begun[k] = v
		}
	}
	begun["content"] = json.RawMessage("[]")
	var usage map[string]json.RawMessage
	_ = json.Unmarshal(msg["usage"], &usage)
	if usage != nil {
		start := make(map[string]json.RawMessage, len(usage))
		for k, v := range usage {
			start[k] = v
		}
		start["output_tokens"] = json.RawMessage("0")
		begun["usage"], _ = json.Marshal(start)
	}
	emit("message_start", map[string]any{"message": begun})
	for i, blk := range content {
		replayBlock(i, blk, emit)
	}
	emit("message_delta", map[string]any{"delta": delta, "usage": usage})
	emit("message_stop", map[string]any{})
	return out, ferr
}

// replayBlock sends the events of content block i: started empty, its content in one delta
// per kind, stopped. A block of a kind that has no deltas starts whole.
func replayBlock(i int, blk map[string]json.RawMessage, emit func(string, map[string]any)) {
	start := make(map[string]json.RawMessage, len(blk))
	for k, v := range blk {
		start[k] = v
	}
	var deltas []map[string]any
	str := func(field string) string {
		var s string
		_ = json.Unmarshal(blk[field], &s)
		return s
	}
	var typ string
	_ = json.Unmarshal(blk["type"], &typ)
	switch {
	case typ == "text":
		start["text"] = json.RawMessage(`""`)
		var citations []json.RawMessage
		if json.Unmarshal(blk["citations"], &citations) == nil && len(citations) > 0 {
			start["citations"] = json.RawMessage("[]")
			for _, c := range citations {
				deltas = append(deltas, map[string]any{"type": "citations_delta", "citation": c})
			}
		}
		if s := str("text"); s != "" {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": s})
		}
	case typ == "thinking":
		start["thinking"], start["signature"] = json.RawMessage(`""`), json.RawMessage(`""`)
		if s := str("thinking"); s != "" {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": s})
		}
		if s := str("signature"); s != "" {
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": s})
		}
	case blk["input"] != nil:
		// A tool call (tool_use, server_tool_use, mcp_tool_use): its input as JSON text.
		start["input"] = json.RawMessage("{}")
		var in bytes.Buffer
		if json.Compact(&in, blk["input"]) == nil && in.String() != "{}" {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": in.String()})
		}
	}
	emit("content_block_start", map[string]any{"index": i, "content_block": start})
	for _, d := range deltas {
		emit("content_block_delta", map[string]any{"index": i, "delta": d})
	}
	emit("content_block_stop", map[string]any{"index": i})
}

// capRule: a message is capped by max_tokens, which every request names (check).
func (messagesAPI) capRule() capRule { return capRule{names: []string{"max_tokens"}, min: 1} }
