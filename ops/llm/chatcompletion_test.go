package llm

import "testing"

// TestParseChatCompletion: the pipeline reads a completion's id, model, text and usage with
// the gateway's parser; a refusal has no text, and a body that is not a completion is refused.
func TestParseChatCompletion(t *testing.T) {
	c, err := ParseChatCompletion([]byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Three sentences."},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":40,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":32}}}`))
	if err != nil || c.ID != "chatcmpl-1" || c.Model != "gpt-4o-mini" || c.Content == nil || *c.Content != "Three sentences." {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	if c.Usage.PromptTokens != 40 || c.Usage.CompletionTokens != 12 || c.Usage.CachedTokens != 32 {
		t.Fatalf("usage %+v", c.Usage)
	}
	c, err = ParseChatCompletion([]byte(`{"id":"chatcmpl-2","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."}}]}`))
	if err != nil || c.Content != nil || c.Usage != (Usage{}) {
		t.Fatalf("a refusal parsed as %+v, %v", c, err)
	}
	for _, bad := range []string{`<html>502 Bad Gateway</html>`, `{"id":"chatcmpl-3"}`, `{"choices":[]}`} {
		if _, err := ParseChatCompletion([]byte(bad)); err == nil {
			t.Fatalf("%s parsed as a completion", bad)
		}
	}
}
