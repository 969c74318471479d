package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Reading a streamed chunk without reflection.
//
// Every event of a streamed chat completion is decoded as it passes, to assemble the answer
// the operation stores, and encoding/json's reflection was the largest part of what relaying
// a stream cost. decodeChunk reads the shape providers send with a small scanner instead.
// It takes the fast path only where its result is certain to be what json.Unmarshal gives:
// anything it does not read exactly as encoding/json would (a key that matches a field only
// case-insensitively, a key with escapes or non-ASCII bytes, a key given twice, a number
// that is not a plain integer, a value of the wrong type, malformed JSON) sends the whole
// event to json.Unmarshal, so the odd event is read, or refused with its error, as before.

// decodeChunk decodes one event of a streamed chat completion into ch, as json.Unmarshal
// does.
func decodeChunk(data []byte, ch *chunk) error { return decodeChunkAfter(data, ch, nil) }

// maxScanDepth bounds the nesting the scanner follows in values it skips; deeper ones go
// to json.Unmarshal, which has a limit of its own.
const maxScanDepth = 64

// chunkScanner reads b from i on. Each of its methods reports false for what it does not
// read exactly as encoding/json would.
type chunkScanner struct {
	b []byte
	i int
	// prev is the head of the stream's chunk before, whose strings a chunk's head reuses
	// (decodeChunkAfter); nil when there is none.
	prev *completionHead
}

// chunkFields are the members of a chunk decodeChunk reads.
var chunkFields = []string{"id", "object", "created", "model", "system_fingerprint", "service_tier", "choices", "usage"}

func (s *chunkScanner) chunk(ch *chunk) bool {
	ok := s.fields(chunkFields, func(name string) bool {
		switch name {
		case "id":
			return s.same(&ch.ID, s.prevHead().ID)
		case "object":
			return s.same(&ch.Object, s.prevHead().Object)
		case "created":
			return s.int64(&ch.Created)
		case "model":
			return s.same(&ch.Model, s.prevHead().Model)
		case "system_fingerprint":
			return s.samePtr(&ch.SystemFingerprint, s.prevHead().SystemFingerprint)
		case "service_tier":
			return s.strPtr(&ch.ServiceTier)
		case "choices":
			return list(s, &ch.Choices, s.choice)
		}
		return s.raw(&ch.Usage)
	})
	s.ws()
	return ok && s.i == len(s.b)
}

// list reads an array into *out, each element with each; null leaves *out nil, as
// json.Unmarshal does.
func list[T any](s *chunkScanner, out *[]T, each func(*T) bool) bool {
	if s.null() {
		*out = nil
		return true
	}
	if !s.next('[') {
		return false
	}
	l := make([]T, 0, 1)
	if s.next(']') {
		*out = l
		return true
	}
	for {
		var v T
		if !each(&v) {
			return false
		}
		l = append(l, v)
		if s.next(',') {
			continue
		}
		if s.next(']') {
			*out = l
			return true
		}
		return false
	}
}

var chunkChoiceFields = []string{"index", "delta", "logprobs", "finish_reason"}

func (s *chunkScanner) choice(c *chunkChoice) bool {
	return s.fields(chunkChoiceFields, func(name string) bool {
		switch name {
		case "index":
			return s.int(&c.Index)
		case "delta":
			return s.delta(&c.Delta)
		case "logprobs":
			return s.raw(&c.Logprobs)
		}
		return s.strPtr(&c.FinishReason)
	})
}

var deltaFields = []string{"role", "content", "refusal", "tool_calls"}

func (s *chunkScanner) delta(d *delta) bool {
	if s.null() {
		return true // json.Unmarshal leaves a struct as it was for null
	}
	return s.fields(deltaFields, func(name string) bool {
		switch name {
		case "role":
			return s.str(&d.Role)
		case "content":
			return s.strPtr(&d.Content)
		case "refusal":
			return s.strPtr(&d.Refusal)
		}
		// Tool calls are rarer and deeper: their value alone goes to json.Unmarshal, into
		// the same field, which reads it as it would in the whole event.
		var raw json.RawMessage
		return s.raw(&raw) && json.Unmarshal(raw, &d.ToolCalls) == nil
	})
}

// fields reads an object whose members of interest are names (at most 32), calling read
// with each such key, positioned at its value, and skipping every other member's value. A
// name given twice, for which json.Unmarshal keeps the last, and a key that matches one of
// names only case-insensitively, which json.Unmarshal folds onto its field, make it false.
func (s *chunkScanner) fields(names []string, read func(name string) bool) bool {
	var seen uint32
	return s.object(func(key []byte) bool {
		for i, n := range names {
			if string(key) != n {
				continue
			}
			if seen&(1<<i) != 0 {
				return false
			}
			seen |= 1 << i
			return read(n)
		}
		return !foldsTo(key, names...) && s.skip(0)
	})
}

// object reads an object, calling field with each key, positioned at its value.
func (s *chunkScanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		s.ws()
		start := s.i
		end, plain, ok := s.stringToken()
		// A key with escapes or other than ASCII may match a field as encoding/json folds
		// it: json.Unmarshal reads those.
		if !ok || !plain || !isASCII(s.b[start+1:end-1]) || !s.next(':') {
			return false
		}
		if !field(s.b[start+1 : end-1]) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

// str reads a string into *v; null leaves *v as it was.
func (s *chunkScanner) str(v *string) bool {
	if s.null() {
		return true
	}
	return s.stringValue(v)
}

// strPtr reads a string into a new *v; null sets *v to nil.
func (s *chunkScanner) strPtr(v **string) bool {
	if s.null() {
		*v = nil
		return true
	}
	var str string
	if !s.stringValue(&str) {
		return false
	}
	*v = &str
	return true
}

func (s *chunkScanner) stringValue(v *string) bool {
	s.ws()
	start := s.i
	end, plain, ok := s.stringToken()
	if !ok {
		return false
	}
	content := s.b[start+1 : end-1]
	if plain && utf8.Valid(content) {
		*v = string(content)
		return true
	}
	// Escapes, and invalid UTF-8 (which encoding/json replaces), are read by encoding/json.
	return json.Unmarshal(s.b[start:end], v) == nil
}

// stringToken checks the string at i and moves past it. It returns the index after its
// closing quote, and whether it has no escape.
func (s *chunkScanner) stringToken() (end int, plain, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return 0, false, false
	}
	plain = true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.i, plain, true
		case c < 0x20:
			return 0, false, false
		case c == '\\':
			plain = false
			j++
			if j >= len(s.b) {
				return 0, false, false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return 0, false, false
				}
				for _, h := range s.b[j+1 : j+5] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				j += 4
			default:
				return 0, false, false
			}
		}
	}
	return 0, false, false
}

// int reads an integer into *v; null leaves *v as it was. A number with a fraction or an
// exponent, or out of range, is json.Unmarshal's to refuse.
func (s *chunkScanner) int(v *int) bool {
	var n int64
	if !s.integer(&n, strconv.IntSize) {
		return false
	}
	*v = int(n)
	return true
}

func (s *chunkScanner) int64(v *int64) bool { return s.integer(v, 64) }

func (s *chunkScanner) integer(v *int64, bits int) bool {
	if s.null() {
		return true
	}
	s.ws()
	start := s.i
	isInt, ok := s.number()
	if !ok || !isInt {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, bits)
	if err != nil {
		return false
	}
	*v = n
	return true
}

// number checks the number at i (JSON's grammar) and moves past it; isInt says it has no
// fraction and no exponent.
func (s *chunkScanner) number() (isInt, ok bool) {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false, false
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return false, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
	return isInt, true
}

// raw copies the value at i into *v, as json.RawMessage keeps it (null too). A null, which
// most chunks carry for their logprobs, is one shared copy: a decoded chunk is only read.
func (s *chunkScanner) raw(v *json.RawMessage) bool {
	s.ws()
	start := s.i
	if !s.skip(0) {
		return false
	}
	if s.i-start == len(jsonNull) && string(s.b[start:s.i]) == jsonNull {
		*v = sharedNull
		return true
	}
	*v = append((*v)[:0:0], s.b[start:s.i]...)
	return true
}

// skip checks the value at i and moves past it.
func (s *chunkScanner) skip(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.stringToken()
		return ok
	case c == '{':
		s.i++
		if s.next('}') {
			return true
		}
		for {
			s.ws()
			if _, _, ok := s.stringToken(); !ok || !s.next(':') || !s.skip(depth+1) {
				return false
			}
			if s.next(',') {
				continue
			}
			return s.next('}')
		}
	case c == '[':
		s.i++
		if s.next(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.next(',') {
				continue
			}
			return s.next(']')
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		_, ok := s.number()
		return ok
	}
}

// null moves past a null at i, reporting whether there was one.
func (s *chunkScanner) null() bool {
	s.ws()
	return s.literal("null")
}

func (s *chunkScanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// next moves past c, after any whitespace, reporting whether it was there.
func (s *chunkScanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *chunkScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// foldsTo reports whether key matches one of names only as encoding/json folds keys
// (case-insensitively): json.Unmarshal would put its value in that field.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// eventType is the type of an event of the Responses or Messages APIs, as json.Unmarshal
// reads its "type" field; "" when it has none.
func eventType(data []byte) string {
	var typ string
	s := chunkScanner{b: data}
	var seen bool
	ok := s.object(func(key []byte) bool {
		if string(key) != "type" {
			return !foldsTo(key, "type") && s.skip(0)
		}
		if seen {
			return false
		}
		seen = true
		return s.str(&typ)
	})
	s.ws()
	if ok && s.i == len(s.b) {
		return typ
	}
	var ev struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &ev)
	return ev.Type
}
