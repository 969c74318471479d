package llm

import (
	"encoding/json"
	"unicode/utf8"
)

// What the chunks of one stream repeat.
//
// Every chunk of a streamed chat completion repeats its head (id, object, model, system
// fingerprint), and most carry null logprobs: read afresh, each was a copy of its own, about
// half of what decoding a token's chunk allocated. decodeChunkAfter reads a head equal to
// the chunk before's into the same strings, and raw reads every null into one shared copy.
// A decoded chunk is only read, never written, so sharing is safe.

// decodeChunkAfter is decodeChunk for a chunk that follows one whose head was prev: every
// chunk of a stream repeats its id, object, model and system fingerprint, and where this
// one's are the same, ch shares prev's strings instead of allocating its own.
func decodeChunkAfter(data []byte, ch *chunk, prev *completionHead) error {
	s := chunkScanner{b: data, prev: prev}
	if s.chunk(ch) {
		return nil
	}
	*ch = chunk{}
	return json.Unmarshal(data, ch)
}

const jsonNull = "null"

// sharedNull is the null raw reads; its capacity is its length, so an append copies it.
var sharedNull = json.RawMessage(jsonNull)[:len(jsonNull):len(jsonNull)]

// prevHead is the head of the chunk before, empty when there is none.
func (s *chunkScanner) prevHead() *completionHead {
	if s.prev == nil {
		return &completionHead{}
	}
	return s.prev
}

// same reads a string into *v as str does, setting *v to was, without a copy, when the
// string is was written plainly.
func (s *chunkScanner) same(v *string, was string) bool {
	if s.plainly(was) {
		*v = was
		return true
	}
	return s.str(v)
}

// samePtr reads a string into *v as strPtr does, setting *v to was when the string is *was
// written plainly: a chunk's head is only read, so two chunks may share the pointer.
func (s *chunkScanner) samePtr(v **string, was *string) bool {
	if was != nil && s.plainly(*was) {
		*v = was
		return true
	}
	return s.strPtr(v)
}

// plainly moves past the string token at i when its bytes are was between quotes, was
// holding nothing that JSON escapes, so that the token reads as was.
func (s *chunkScanner) plainly(was string) bool {
	s.ws()
	end := s.i + len(was) + 1
	if was == "" || end >= len(s.b) || s.b[s.i] != '"' || s.b[end] != '"' || string(s.b[s.i+1:end]) != was {
		return false
	}
	for i := 0; i < len(was); i++ {
		if c := was[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	if !utf8.ValidString(was) {
		return false
	}
	s.i = end + 1
	return true
}
