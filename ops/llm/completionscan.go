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

var completionFields = []string{"id", "object", "created", "model", "system_fingerprint", "service_tier", "choices", "usage"}

func (s *chunkScanner) completion(c *completion) bool {
	ok := s.fields(completionFields, func(name string) bool {
		switch name {
		case "id":
			return s.str(&c.ID)
		case "object":
			return s.str(&c.Object)
		case "created":
			return s.int64(&c.Created)
		case "model":
			return s.str(&c.Model)
		case "system_fingerprint":
			return s.strPtr(&c.SystemFingerprint)
		case "service_tier":
			return s.strPtr(&c.ServiceTier)
		case "choices":
			return list(s, &c.Choices, s.messageChoice)
		}
		return s.raw(&c.Usage)
	})
	s.ws()
	return ok && s.i == len(s.b)
}

var choiceFields = []string{"index", "message", "logprobs", "finish_reason"}

func (s *chunkScanner) messageChoice(c *choice) bool {
	return s.fields(choiceFields, func(name string) bool {
		switch name {
		case "index":
			return s.int(&c.Index)
		case "message":
			return s.message(&c.Message)
		case "logprobs":
			return s.raw(&c.Logprobs)
		}
		return s.strPtr(&c.FinishReason)
	})
}

var messageFields = []string{"role", "content", "refusal", "tool_calls", "audio"}

func (s *chunkScanner) message(m *message) bool {
	if s.null() {
		return true // json.Unmarshal leaves a struct as it was for null
	}
	return s.fields(messageFields, func(name string) bool {
		switch name {
		case "role":
			return s.str(&m.Role)
		case "content":
			return s.strPtr(&m.Content)
		case "refusal":
			return s.strPtr(&m.Refusal)
		case "tool_calls":
			// As in a chunk's delta: their value alone goes to json.Unmarshal.
			var raw json.RawMessage
			return s.raw(&raw) && json.Unmarshal(raw, &m.ToolCalls) == nil
		}
		return s.raw(&m.Audio)
	})
}
