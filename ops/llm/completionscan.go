package llm

import "encoding/json"

// Reading a whole chat completion without reflection.
//
// Every non-streaming chat completion is decoded once to find its id, model and usage, and
// json.Unmarshal's reflection was the largest part of what reading it cost. decodeCompletion
// reads it with the chunk scanner (chunkscan.go), on the same terms: anything the scanner
// does not read exactly as json.Unmarshal would goes to json.Unmarshal whole.

// decodeCompletion decodes a non-streaming chat completion into c, as json.Unmarshal does.
func decodeCompletion(data []byte, c *completion) error {
	s := chunkScanner{b: data}
	if s.completion(c) {
		return nil
	}
	*c = completion{}
	return json.Unmarshal(data, c)
}

func (s *chunkScanner) completion(c *completion) bool {
	var seen uint16
	ok := s.object(func(key []byte) bool {
		var bit uint16
		var ok bool
		switch string(key) {
		case "id":
			bit, ok = 1<<0, s.str(&c.ID)
		case "object":
			bit, ok = 1<<1, s.str(&c.Object)
		case "created":
			bit, ok = 1<<2, s.int64(&c.Created)
		case "model":
			bit, ok = 1<<3, s.str(&c.Model)
		case "system_fingerprint":
			bit, ok = 1<<4, s.strPtr(&c.SystemFingerprint)
		case "service_tier":
			bit, ok = 1<<5, s.strPtr(&c.ServiceTier)
		case "choices":
			bit, ok = 1<<6, s.messageChoices(&c.Choices)
		case "usage":
			bit, ok = 1<<7, s.raw(&c.Usage)
		default:
			return !foldsTo(key, "id", "object", "created", "model", "system_fingerprint", "service_tier", "choices", "usage") && s.skip(0)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
	s.ws()
	return ok && s.i == len(s.b)
}

func (s *chunkScanner) messageChoices(out *[]choice) bool {
	if s.null() {
		*out = nil
		return true
	}
	if !s.next('[') {
		return false
	}
	list := make([]choice, 0, 1)
	if s.next(']') {
		*out = list
		return true
	}
	for {
		var c choice
		if !s.messageChoice(&c) {
			return false
		}
		list = append(list, c)
		if s.next(',') {
			continue
		}
		if s.next(']') {
			*out = list
			return true
		}
		return false
	}
}

func (s *chunkScanner) messageChoice(c *choice) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		var bit uint8
		var ok bool
		switch string(key) {
		case "index":
			bit, ok = 1<<0, s.int(&c.Index)
		case "message":
			bit, ok = 1<<1, s.message(&c.Message)
		case "logprobs":
			bit, ok = 1<<2, s.raw(&c.Logprobs)
		case "finish_reason":
			bit, ok = 1<<3, s.strPtr(&c.FinishReason)
		default:
			return !foldsTo(key, "index", "message", "logprobs", "finish_reason") && s.skip(0)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
}

func (s *chunkScanner) message(m *message) bool {
	if s.null() {
		return true // json.Unmarshal leaves a struct as it was for null
	}
	var seen uint8
	return s.object(func(key []byte) bool {
		var bit uint8
		var ok bool
		switch string(key) {
		case "role":
			bit, ok = 1<<0, s.str(&m.Role)
		case "content":
			bit, ok = 1<<1, s.strPtr(&m.Content)
		case "refusal":
			bit, ok = 1<<2, s.strPtr(&m.Refusal)
		case "tool_calls":
			// As in a chunk's delta: their value alone goes to json.Unmarshal.
			var raw json.RawMessage
			bit, ok = 1<<3, s.raw(&raw)
			ok = ok && json.Unmarshal(raw, &m.ToolCalls) == nil
		case "audio":
			bit, ok = 1<<4, s.raw(&m.Audio)
		default:
			return !foldsTo(key, "role", "content", "refusal", "tool_calls", "audio") && s.skip(0)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
}
