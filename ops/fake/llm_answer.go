package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// writeCompletion answers a request that did not ask for a stream: every choice in one
// chat.completion object.
func writeCompletion(w http.ResponseWriter, g Generation, choices []choice, usage obj) {
	msgs := make([]obj, len(choices))
	for i, c := range choices {
		msgs[i] = obj{"index": i, "message": messageObject(c), "logprobs": nil, "finish_reason": finishReason(c)}
	}
	writeJSON(w, http.StatusOK, obj{
		"id": g.ID, "object": "chat.completion", "created": g.Created.Unix(), "model": g.Model,
		"system_fingerprint": "fp_settle_fake", "service_tier": "default", "choices": msgs, "usage": usage,
	})
}

// stream writes the completion as server-sent events, one token per chunk.
func (l *LLM) stream(w http.ResponseWriter, r *http.Request, g Generation, req chatRequest, choices []choice, usage obj, fault *LLMFault, outcome *string) {
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sent := 0
	dropAt := -1
	if fault != nil && fault.Kind == LLMFaultDropStream {
		dropAt = max(fault.Chunk, 0)
	}
	emit := func(chunkChoices []obj, u any) bool {
		if sent == dropAt {
			*outcome = "fault"
			dropConnection(w)
			return false
		}
		c := obj{"id": g.ID, "object": "chat.completion.chunk", "created": g.Created.Unix(), "model": g.Model,
			"system_fingerprint": "fp_settle_fake", "choices": chunkChoices}
		if includeUsage {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			*outcome = "client_gone"
			return false
		}
		_ = rc.Flush()
		sent++
		return true
	}
	pause := func() bool {
		if d := time.Duration(l.chunkDelay.Load()); d > 0 && !l.sleep(r.Context(), d) {
			*outcome = "client_gone"
			return false
		}
		return true
	}
	for i, c := range choices {
		first := obj{"role": "assistant", "content": ""}
		if c.toolName != "" {
			first = obj{"role": "assistant", "content": nil, "tool_calls": []obj{{"index": 0, "id": c.toolID, "type": "function",
				"function": obj{"name": c.toolName, "arguments": ""}}}}
		}
		if !emit([]obj{{"index": i, "delta": first, "logprobs": nil, "finish_reason": nil}}, nil) {
			return
		}
		for _, tok := range c.tokens {
			if !pause() {
				return
			}
			delta := obj{"content": tok}
			if c.toolName != "" {
				delta = obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": tok}}}}
			}
			if !emit([]obj{{"index": i, "delta": delta, "logprobs": nil, "finish_reason": nil}}, nil) {
				return
			}
		}
		if !emit([]obj{{"index": i, "delta": obj{}, "logprobs": nil, "finish_reason": finishReason(c)}}, nil) {
			return
		}
	}
	if includeUsage && !emit([]obj{}, usage) {
		return
	}
	if sent == dropAt {
		*outcome = "fault"
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func messageObject(c choice) obj {
	if c.toolName != "" {
		return obj{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []obj{{"id": c.toolID, "type": "function",
			"function": obj{"name": c.toolName, "arguments": c.toolArgs}}}}
	}
	return obj{"role": "assistant", "content": c.content, "refusal": nil}
}

func finishReason(c choice) string {
	if c.toolName != "" {
		return "tool_calls"
	}
	return "stop"
}

func usageObject(g Generation) obj {
	return obj{"prompt_tokens": g.PromptTokens, "completion_tokens": g.CompletionTokens,
		"total_tokens":              g.PromptTokens + g.CompletionTokens,
		"prompt_tokens_details":     obj{"cached_tokens": g.CachedTokens, "audio_tokens": 0},
		"completion_tokens_details": obj{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
}
