package llm

// Reading a usage object without reflection.
//
// Every chat completion's usage is read once its answer is whole, streamed or not, to
// price the call. scanUsage reads the shape providers send with the chunk scanner
// (chunkscan.go), under the same terms: anything it does not read exactly as json.Unmarshal
// reads it into parseUsage's struct (a key that matches a field only case-insensitively, a
// key given twice, a number that is not a plain integer, a value of the wrong type,
// malformed JSON) is left to json.Unmarshal.

// scanUsage reads the usage object raw into u's prompt, completion, total and cached
// tokens, reporting false for anything parseUsage must hand to json.Unmarshal.
func scanUsage(raw []byte, u *Usage) bool {
	s := chunkScanner{b: raw}
	var seen uint8
	ok := s.object(func(key []byte) bool {
		var bit uint8
		var ok bool
		switch string(key) {
		case "prompt_tokens":
			bit, ok = 1<<0, s.int(&u.PromptTokens)
		case "completion_tokens":
			bit, ok = 1<<1, s.int(&u.CompletionTokens)
		case "total_tokens":
			bit, ok = 1<<2, s.int(&u.TotalTokens)
		case "prompt_tokens_details":
			bit, ok = 1<<3, s.cachedTokens(&u.CachedTokens)
		default:
			return !foldsTo(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details") && s.skip(0)
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

// cachedTokens reads prompt_tokens_details into *n, its cached_tokens: 0 for null, for an
// object without them, or with them null, as json.Unmarshal leaves a new struct's field.
func (s *chunkScanner) cachedTokens(n *int) bool {
	*n = 0
	if s.null() {
		return true
	}
	seen := false
	return s.object(func(key []byte) bool {
		if string(key) != "cached_tokens" {
			return !foldsTo(key, "cached_tokens") && s.skip(0)
		}
		if seen {
			return false
		}
		seen = true
		return s.int(n)
	})
}
