package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// completion is a chat completion in the provider's non-streaming shape: what the gateway
// stores and replays.
type completion struct {
	completionHead
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

// completionHead is what a completion and every chunk of its stream begin with; only Object
// differs between them ("chat.completion", "chat.completion.chunk").
type completionHead struct {
	ID                string  `json:"id"`
	Object            string  `json:"object"`
	Created           int64   `json:"created"`
	Model             string  `json:"model"`
	SystemFingerprint *string `json:"system_fingerprint,omitempty"`
	ServiceTier       *string `json:"service_tier,omitempty"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      message         `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type message struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []toolCall      `json:"tool_calls,omitempty"`
	Audio     json.RawMessage `json:"audio,omitempty"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chunk is one event of a streamed completion.
type chunk struct {
	completionHead
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// Usage is what one generation cost in tokens. PromptTokens are every token of the prompt:
// CachedTokens of them were read from the provider's prompt cache, and CacheWriteTokens
// written to it (Anthropic bills a write above an input token; CacheWrite1hTokens of them
// were written for an hour, which costs more still).
type Usage struct {
	PromptTokens       int `json:"prompt_tokens"`
	CompletionTokens   int `json:"completion_tokens"`
	CachedTokens       int `json:"cached_tokens"`
	CacheWriteTokens   int `json:"cache_write_tokens,omitempty"`
	CacheWrite1hTokens int `json:"cache_write_1h_tokens,omitempty"`
	TotalTokens        int `json:"total_tokens"`
}

// parseUsage reads the provider's usage object: with scanUsage, or where that cannot read
// it exactly as encoding/json would, with json.Unmarshal.
func parseUsage(raw json.RawMessage) (Usage, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Usage{}, false
	}
	var out Usage
	if !scanUsage(raw, &out) {
		var u struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			TotalTokens         int `json:"total_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
		if json.Unmarshal(raw, &u) != nil {
			return Usage{}, false
		}
		out = Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if u.PromptTokensDetails != nil {
			out.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out, true
}

// parseCompletion reads a non-streaming answer; it must at least carry an id and choices.
func parseCompletion(body []byte) (*completion, error) {
	var c completion
	if err := decodeCompletion(body, &c); err != nil {
		return nil, fmt.Errorf("decode completion: %w", err)
	}
	if c.ID == "" || c.Choices == nil {
		return nil, fmt.Errorf("completion without id or choices")
	}
	return &c, nil
}

// assembler rebuilds a completion from the chunks of a stream. The pieces a choice's
// chunks add up to (content, refusal, tool arguments, logprobs) are appended where they
// grow and turned into the completion's fields once, by completion: rebuilding each
// string or list anew on every token made a long answer's assembly cost the square of its
// length.
type assembler struct {
	c       completion
	choices map[int]*choice
	parts   map[int]*choiceParts
	tools   map[[2]int]*toolCall
	args    map[[2]int]*strings.Builder
	chunks  int
	done    bool
}

// choiceParts is what one choice's chunks have added so far.
type choiceParts struct {
	content, refusal       strings.Builder
	hasContent, hasRefusal bool
	// logprobs is the merged object once one chunk's logprobs was an object; until then
	// rawLogprobs is the last chunk's as it came (merged tells which to store).
	logprobs    map[string][]json.RawMessage
	rawLogprobs json.RawMessage
	merged      bool
}

func newAssembler() *assembler {
	return &assembler{choices: map[int]*choice{}, parts: map[int]*choiceParts{},
		tools: map[[2]int]*toolCall{}, args: map[[2]int]*strings.Builder{}}
}

// add takes one event's data. It reports whether the event carried output (a token, a
// tool call piece), which is what first_token means, and whether it is the final usage
// chunk (see isUsageOnly), so the event is decoded once.
func (a *assembler) add(data []byte) (token, usageOnly bool, err error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		a.done = true
		return false, false, nil
	}
	var ch chunk
	var prev *completionHead
	if a.c.ID != "" {
		prev = &a.c.completionHead
	}
	if err := decodeChunkAfter(data, &ch, prev); err != nil {
		return false, false, fmt.Errorf("decode chunk %d: %w", a.chunks+1, err)
	}
	if ch.ID == "" && a.c.ID == "" {
		return false, false, fmt.Errorf("chunk %d has no id", a.chunks+1)
	}
	usageOnly = len(ch.Choices) == 0 && len(ch.Usage) > 0 && !bytes.Equal(ch.Usage, []byte("null"))
	a.chunks++
	if a.c.ID == "" {
		a.c.completionHead = ch.completionHead // completion sets Object
	}
	if len(ch.Usage) > 0 && !bytes.Equal(ch.Usage, []byte("null")) {
		a.c.Usage = ch.Usage
	}
	for _, cc := range ch.Choices {
		c := a.choices[cc.Index]
		if c == nil {
			c = &choice{Index: cc.Index, Message: message{Role: "assistant"}}
			a.choices[cc.Index] = c
			a.parts[cc.Index] = &choiceParts{}
		}
		p := a.parts[cc.Index]
		d := cc.Delta
		if d.Role != "" {
			c.Message.Role = d.Role
		}
		if d.Content != nil && *d.Content != "" {
			p.content.WriteString(*d.Content)
			p.hasContent, token = true, true
		}
		if d.Refusal != nil && *d.Refusal != "" {
			p.refusal.WriteString(*d.Refusal)
			p.hasRefusal, token = true, true
		}
		for i, tc := range d.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			key := [2]int{cc.Index, idx}
			t := a.tools[key]
			if t == nil {
				t = &toolCall{Type: "function"}
				a.tools[key] = t
				a.args[key] = &strings.Builder{}
			}
			if tc.ID != "" {
				t.ID = tc.ID
			}
			if tc.Type != "" {
				t.Type = tc.Type
			}
			if tc.Function.Name != "" {
				t.Function.Name = tc.Function.Name
			}
			a.args[key].WriteString(tc.Function.Arguments)
			token = true
		}
		if len(cc.Logprobs) > 0 && !bytes.Equal(cc.Logprobs, []byte("null")) {
			p.addLogprobs(cc.Logprobs)
		}
		if cc.FinishReason != nil {
			c.FinishReason = cc.FinishReason
		}
	}
	return token, usageOnly, nil
}

// addLogprobs merges one chunk's logprobs: the lists under each key of an object are
// appended to the ones before; a chunk's logprobs that are not an object are left out once
// an object was seen, and replace what came before until then.
func (p *choiceParts) addLogprobs(next json.RawMessage) {
	if p.logprobs == nil {
		p.rawLogprobs = next
		var m map[string][]json.RawMessage
		if json.Unmarshal(next, &m) == nil && m != nil {
			p.logprobs = m
		}
		return
	}
	var m map[string][]json.RawMessage
	if json.Unmarshal(next, &m) != nil {
		return
	}
	for k, v := range m {
		p.logprobs[k] = append(p.logprobs[k], v...)
	}
	p.merged = true
}

// fill sets c's content, refusal and logprobs from what its chunks added.
func (p *choiceParts) fill(c *choice) {
	if p.hasContent {
		s := p.content.String()
		c.Message.Content = &s
	}
	if p.hasRefusal {
		s := p.refusal.String()
		c.Message.Refusal = &s
	}
	c.Logprobs = p.rawLogprobs
	if p.merged {
		c.Logprobs, _ = json.Marshal(p.logprobs)
	}
}

// whole reports whether the stream ended with [DONE].
func (a *assembler) whole() bool { return a.done }

// id is "": stored chat completions are found by the operation they are tagged with, so
// their ids need not be recorded before the answer.
func (a *assembler) id() string { return "" }

// answer is the completion the stream assembled to, encoded as it is stored.
func (a *assembler) answer() (answer, error) {
	if a.c.ID == "" {
		return answer{}, fmt.Errorf("stream without chunks")
	}
	c := a.completion()
	body, err := json.Marshal(c)
	if err != nil {
		return answer{}, err
	}
	u, _ := parseUsage(c.Usage)
	return answer{body: body, id: c.ID, model: c.Model, usage: u}, nil
}

// completion returns what the stream assembled to, in the non-streaming shape.
func (a *assembler) completion() *completion {
	c := a.c
	c.Object = "chat.completion"
	idx := make([]int, 0, len(a.choices))
	for i := range a.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	c.Choices = make([]choice, 0, len(idx))
	for _, i := range idx {
		ch := *a.choices[i]
		a.parts[i].fill(&ch)
		var keys [][2]int
		for k := range a.tools {
			if k[0] == i {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(x, y int) bool { return keys[x][1] < keys[y][1] })
		for _, k := range keys {
			t := *a.tools[k]
			t.Index = nil
			t.Function.Arguments = a.args[k].String()
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, t)
		}
		if len(ch.Logprobs) == 0 {
			ch.Logprobs = json.RawMessage("null")
		}
		c.Choices = append(c.Choices, ch)
	}
	return &c
}

// replayEvents turns a stored completion back into the data of SSE events: per choice a
// role chunk, its content, its tool calls and its finish reason, then the usage chunk if
// the client asked for it. [DONE] is not included.
func replayEvents(body []byte, includeUsage bool) ([][]byte, error) {
	c, err := parseCompletion(body)
	if err != nil {
		return nil, err
	}
	base := chunk{completionHead: c.completionHead}
	base.Object = "chat.completion.chunk"
	if includeUsage {
		base.Usage = json.RawMessage("null")
	}
	var out [][]byte
	emit := func(cc ...chunkChoice) error {
		ch := base
		ch.Choices = cc
		if cc == nil {
			ch.Choices = []chunkChoice{}
			ch.Usage = c.Usage
		}
		b, err := json.Marshal(ch)
		if err != nil {
			return err
		}
		out = append(out, b)
		return nil
	}
	empty := ""
	for _, ch := range c.Choices {
		m := ch.Message
		first := delta{Role: m.Role, Content: &empty}
		if m.Content == nil {
			first.Content = nil
		}
		if err := emit(chunkChoice{Index: ch.Index, Delta: first, Logprobs: json.RawMessage("null")}); err != nil {
			return nil, err
		}
		if m.Content != nil && *m.Content != "" {
			if err := emit(chunkChoice{Index: ch.Index, Delta: delta{Content: m.Content}, Logprobs: ch.Logprobs}); err != nil {
				return nil, err
			}
		}
		if m.Refusal != nil && *m.Refusal != "" {
			if err := emit(chunkChoice{Index: ch.Index, Delta: delta{Refusal: m.Refusal}, Logprobs: json.RawMessage("null")}); err != nil {
				return nil, err
			}
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]toolCall, len(m.ToolCalls))
			for i, t := range m.ToolCalls {
				t.Index = &i
				calls[i] = t
			}
			if err := emit(chunkChoice{Index: ch.Index, Delta: delta{ToolCalls: calls}, Logprobs: json.RawMessage("null")}); err != nil {
				return nil, err
			}
		}
		if err := emit(chunkChoice{Index: ch.Index, Delta: delta{}, Logprobs: json.RawMessage("null"), FinishReason: ch.FinishReason}); err != nil {
			return nil, err
		}
	}
	if includeUsage && len(c.Usage) > 0 {
		if err := emit(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isUsageOnly reports whether an event is the final usage chunk (no choices), which only
// clients that asked for usage receive.
func isUsageOnly(data []byte) bool {
	var ch struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return false
	}
	return len(ch.Choices) == 0 && len(ch.Usage) > 0 && !bytes.Equal(ch.Usage, []byte("null"))
}

// sse frames one event's data.
func sse(data []byte) []byte {
	return appendSSE(make([]byte, 0, len(data)+8), data)
}

// appendSSE appends sse(data) to b.
func appendSSE(b, data []byte) []byte {
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// typedSSE frames one event's data under its type as the event's name, as the Responses
// and Messages APIs send their events.
func typedSSE(data []byte) []byte {
	return appendTypedSSE(make([]byte, 0, len(data)+48), data)
}

// appendTypedSSE appends typedSSE(data) to b.
func appendTypedSSE(b, data []byte) []byte {
	typ := eventType(data)
	b = append(append(append(b, "event: "...), typ...), '\n')
	return append(append(append(b, "data: "...), data...), '\n', '\n')
}

// doneEvent ends every stream.
var doneEvent = []byte("data: [DONE]\n\n")
