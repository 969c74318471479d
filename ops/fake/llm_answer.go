package fake

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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
	tail := chunkTail(g)
	var buf, tokenChoice []byte
	// send writes one event whose choices are already encoded.
	send := func(choicesJSON []byte, u any) bool {
		if sent == dropAt {
			*outcome = "fault"
			dropConnection(w)
			return false
		}
		buf = appendChunk(buf[:0], choicesJSON, tail, includeUsage, u)
		if _, err := w.Write(buf); err != nil {
			*outcome = "client_gone"
			return false
		}
		_ = rc.Flush()
		sent++
		return true
	}
	emit := func(chunkChoices []obj, u any) bool {
		b, _ := json.Marshal(chunkChoices)
		return send(b, u)
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
			if c.toolName != "" {
				delta := obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": tok}}}}
				if !emit([]obj{{"index": i, "delta": delta, "logprobs": nil, "finish_reason": nil}}, nil) {
					return
				}
				continue
			}
			if tokenChoice = appendTokenChoice(tokenChoice[:0], i, tok); !send(tokenChoice, nil) {
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

// A stream's chunks are encoded by hand where they repeat: a load test's fake sends
// thousands a second, and encoding each chunk's map (reflection, its keys sorted) took
// about a third of the fake's streaming CPU, its writes most of the rest. The bytes are
// json.Marshal's of the same map, keys in its sorted order and strings escaped as it
// escapes them (TestAChunkIsEncodedAsAMapWouldBe).

// chunkTail is what follows a chunk's choices, the same for each chunk of g's stream: the
// keys after "choices" in sorted order, without the closing brace (usage may follow).
func chunkTail(g Generation) []byte {
	b, _ := json.Marshal(obj{"id": g.ID, "object": "chat.completion.chunk", "created": g.Created.Unix(),
		"model": g.Model, "system_fingerprint": "fp_settle_fake"})
	b[0] = ','
	return b[:len(b)-1]
}

// appendChunk appends one server-sent event: the chunk with its encoded choices, and its
// usage (null when u is) when the request asked for usage.
func appendChunk(b, choicesJSON, tail []byte, includeUsage bool, u any) []byte {
	b = append(b, `data: {"choices":`...)
	b = append(b, choicesJSON...)
	b = append(b, tail...)
	if includeUsage {
		ub, _ := json.Marshal(u)
		b = append(append(b, `,"usage":`...), ub...)
	}
	return append(b, "}\n\n"...)
}

// appendTokenChoice appends the choices of a content token's chunk: choice i's delta.
func appendTokenChoice(b []byte, i int, tok string) []byte {
	t, _ := json.Marshal(tok)
	b = append(b, `[{"delta":{"content":`...)
	b = append(b, t...)
	b = append(b, `},"finish_reason":null,"index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `,"logprobs":null}]`...)
}
