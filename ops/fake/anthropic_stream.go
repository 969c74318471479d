package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// anthropicMessage is the message in Anthropic's shape; whole says it is complete (its
// content, stop reason and output tokens), as opposed to the start of a stream.
func anthropicMessage(g AnthropicGeneration, c choice, whole bool) obj {
	m := obj{"id": g.ID, "type": "message", "role": "assistant", "model": g.Model, "content": []obj{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(g, 1)}
	if whole {
		m["content"] = []obj{contentBlock(c, true)}
		m["stop_reason"] = g.StopReason
		m["usage"] = anthropicUsage(g, g.OutputTokens)
	}
	return m
}

// contentBlock is the answer's one content block: text, or a tool call when the request
// forced one; whole says its text or input is complete.
func contentBlock(c choice, whole bool) obj {
	if c.toolName != "" {
		input := json.RawMessage("{}")
		if whole {
			input = json.RawMessage(c.toolArgs)
		}
		return obj{"type": "tool_use", "id": strings.Replace(c.toolID, "call_", "toolu_", 1), "name": c.toolName, "input": input}
	}
	text := ""
	if whole {
		text = c.content
	}
	return obj{"type": "text", "text": text}
}

func anthropicUsage(g AnthropicGeneration, outputTokens int) obj {
	return obj{"input_tokens": g.InputTokens, "output_tokens": outputTokens,
		"cache_creation_input_tokens": g.CacheCreationInputTokens, "cache_read_input_tokens": g.CacheReadInputTokens,
		"cache_creation": obj{"ephemeral_5m_input_tokens": g.CacheCreationInputTokens - g.CacheCreation1hInputTokens,
			"ephemeral_1h_input_tokens": g.CacheCreation1hInputTokens},
		"service_tier": "standard"}
}

// stream writes the message as Anthropic's server-sent events, one token a delta. A
// drop_stream fault drops the connection after Chunk events; a server_error or overloaded
// fault with Chunk sends an error event after Chunk events and ends the stream. It returns
// the outcome to log.
func (a *Anthropic) stream(w http.ResponseWriter, r *http.Request, g AnthropicGeneration, c choice, fault *LLMFault) string {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	dropAt, failAt := -1, -1
	if fault != nil && fault.Kind == LLMFaultDropStream {
		dropAt = fault.Chunk
	}
	if breaksStream(fault) {
		failAt = fault.Chunk
	}
	sent := 0
	outcome := "generated"
	emit := func(typ string, o obj) bool {
		switch sent {
		case dropAt:
			outcome = "fault"
			dropConnection(w)
			return false
		case failAt:
			outcome = "fault"
			e := obj{"type": "api_error", "message": "Internal server error"}
			if fault.Kind == LLMFaultOverloaded {
				e = obj{"type": "overloaded_error", "message": "Overloaded"}
			}
			writeEvent(w, "error", obj{"type": "error", "error": e, "request_id": g.RequestID})
			_ = rc.Flush()
			return false
		}
		o["type"] = typ
		if !writeEvent(w, typ, o) {
			outcome = "client_gone"
			return false
		}
		_ = rc.Flush()
		sent++
		return true
	}
	pause := func() bool {
		if !a.srv.sleep(r.Context(), time.Duration(a.chunkDelay.Load())) {
			outcome = "client_gone"
			return false
		}
		return true
	}
	if !emit("message_start", obj{"message": anthropicMessage(g, c, false)}) ||
		!emit("content_block_start", obj{"index": 0, "content_block": contentBlock(c, false)}) ||
		!emit("ping", obj{}) {
		return outcome
	}
	for _, tok := range c.tokens {
		delta := obj{"type": "text_delta", "text": tok}
		if c.toolName != "" {
			delta = obj{"type": "input_json_delta", "partial_json": tok}
		}
		if !pause() || !emit("content_block_delta", obj{"index": 0, "delta": delta}) {
			return outcome
		}
	}
	usage := obj{"output_tokens": g.OutputTokens, "input_tokens": g.InputTokens,
		"cache_creation_input_tokens": g.CacheCreationInputTokens, "cache_read_input_tokens": g.CacheReadInputTokens}
	if emit("content_block_stop", obj{"index": 0}) &&
		emit("message_delta", obj{"delta": obj{"stop_reason": g.StopReason, "stop_sequence": nil}, "usage": usage}) &&
		emit("message_stop", obj{}) && sent == dropAt {
		outcome = "fault"
		dropConnection(w)
	}
	return outcome
}

// writeEvent writes one server-sent event with its type; false means the client is gone.
func writeEvent(w http.ResponseWriter, typ string, o obj) bool {
	b, _ := json.Marshal(o)
	_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	return err == nil
}
