package llm

// Reading a usage object without reflection.
//
// Every chat completion's usage is read once its answer is whole, streamed or not, to
// price the call. scanUsage reads the shape providers send with the chunk scanner
// (chunkscan.go), under the same terms: anything it does not read exactly as json.Unmarshal
// reads it into parseUsage's struct (a key that matches a field only case-insensitively, a
// key given twice, a number that is not a plain integer, a value of the wrong type,
// malformed JSON) is left to json.Unmarshal.

var usageFields = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}

// scanUsage reads the usage object raw into u's prompt, completion, total and cached
// tokens, reporting false for anything parseUsage must hand to json.Unmarshal.
func scanUsage(raw []byte, u *Usage) bool {
	s := chunkScanner{b: raw}
	ok := s.fields(usageFields, func(name string) bool {
		switch name {
		case "prompt_tokens":
			return s.int(&u.PromptTokens)
		case "completion_tokens":
			return s.int(&u.CompletionTokens)
		case "total_tokens":
			return s.int(&u.TotalTokens)
		}
		return s.cachedTokens(&u.CachedTokens)
	})
	s.ws()
	return ok && s.i == len(s.b)
}

var cachedTokensFields = []string{"cached_tokens"}

// cachedTokens reads prompt_tokens_details into *n, its cached_tokens: 0 for null, for an
// object without them, or with them null, as json.Unmarshal leaves a new struct's field.
func (s *chunkScanner) cachedTokens(n *int) bool {
	*n = 0
	if s.null() {
		return true
	}
	return s.fields(cachedTokensFields, func(string) bool { return s.int(n) })
}
