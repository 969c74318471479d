package llm

// ChatCompletion is a chat completion in the provider's non-streaming shape, read with the
// gateway's own parser, for code outside the gateway that sends chat completions itself
// (the pipeline jobs).
type ChatCompletion struct {
	ID    string
	Model string
	// Content is the text of the first choice's message; nil when there is none (no choice,
	// or a refusal or tool calls instead of text).
	Content *string
	// Usage is what the provider said the completion cost in tokens; zero when it said
	// nothing.
	Usage Usage
}

// ParseChatCompletion reads a chat completion as the gateway does: it must at least carry
// an id and choices.
func ParseChatCompletion(body []byte) (*ChatCompletion, error) {
	c, err := parseCompletion(body)
	if err != nil {
		return nil, err
	}
	out := &ChatCompletion{ID: c.ID, Model: c.Model}
	out.Usage, _ = parseUsage(c.Usage)
	if len(c.Choices) > 0 {
		out.Content = c.Choices[0].Message.Content
	}
	return out, nil
}
