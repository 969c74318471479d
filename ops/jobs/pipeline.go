package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Profile is a model profile: which model and how it is asked. Changing a profile's fields
// changes the generation, so profiles are named and versioned by their name.
type Profile struct {
	Model       string  `json:"model"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
}

// Catalog is what a job may ask for: pipelines with their prompt versions, and profiles.
type Catalog struct {
	// Prompts maps a pipeline to its prompt versions and their system prompts.
	Prompts  map[string]map[string]string
	Profiles map[string]Profile
	// ChunkSize is the most characters of one chunk.
	ChunkSize int
}

// DefaultCatalog is the summarise pipeline with two prompt versions and three profiles.
func DefaultCatalog() *Catalog {
	return &Catalog{
		Prompts: map[string]map[string]string{
			"summarise": {
				"v1": "Summarise the document below in three sentences.",
				"v2": "Summarise the document below in one short paragraph a support agent can read aloud.",
			},
		},
		Profiles: map[string]Profile{
			"fast":    {Model: "gpt-4o-mini", MaxTokens: 48, Temperature: 0},
			"quality": {Model: "gpt-4o", MaxTokens: 96, Temperature: 0},
			"small":   {Model: "fake-small", MaxTokens: 32, Temperature: 0},
		},
		ChunkSize: 2000,
	}
}

// check refuses a pipeline, prompt version or profile the catalog does not know.
func (c *Catalog) check(pipeline, version, profile string) error {
	prompts, ok := c.Prompts[pipeline]
	if !ok {
		return &ops.Error{Code: ops.EINVALID, Reason: "unknown_pipeline", Message: fmt.Sprintf("There is no pipeline %q.", pipeline)}
	}
	if _, ok := prompts[version]; !ok {
		return &ops.Error{Code: ops.EINVALID, Reason: "unknown_prompt_version", Message: fmt.Sprintf("Pipeline %s has no prompt version %q.", pipeline, version)}
	}
	if _, ok := c.Profiles[profile]; !ok {
		return &ops.Error{Code: ops.EINVALID, Reason: "unknown_model_profile", Message: fmt.Sprintf("There is no model profile %q.", profile)}
	}
	return nil
}

// The code versions of the stages. A stage's checkpoint is reused only by the same version
// of its code; the validator's is configurable (Worker.ValidatorVersion).
const (
	uploadVersion  = "upload/v1"
	extractVersion = "extract/v1"
	chunkVersion   = "chunk/v1"
	llmVersion     = "llm/v1"
	publishVersion = "publish/v1"
	// DefaultValidatorVersion is the validator's version unless the worker says otherwise.
	DefaultValidatorVersion = "validate/v1"
)

// extractText normalises a document's text: one space between words, paragraphs kept.
func extractText(raw string) string {
	var paras []string
	for _, p := range strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n\n") {
		if f := strings.Join(strings.Fields(p), " "); f != "" {
			paras = append(paras, f)
		}
	}
	return strings.Join(paras, "\n\n")
}

// chunkText splits text into chunks of at most size characters, on paragraph and word
// boundaries where it can.
func chunkText(text string, size int) []string {
	if size <= 0 {
		size = 2000
	}
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			chunks = append(chunks, cur.String())
			cur.Reset()
		}
	}
	for _, word := range strings.Fields(text) {
		if cur.Len() > 0 && utf8.RuneCountInString(cur.String())+1+utf8.RuneCountInString(word) > size {
			flush()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	flush()
	return chunks
}

// chatBody is the chat completion the llm_done stage sends: the system prompt of the
// version and the chunks as one user message, so one job is one generation.
func chatBody(prompt string, p Profile, chunks []string) []byte {
	parts := make([]string, len(chunks))
	for i, c := range chunks {
		parts[i] = fmt.Sprintf("[part %d of %d]\n%s", i+1, len(chunks), c)
	}
	b, err := json.Marshal(map[string]any{
		"model": p.Model, "max_tokens": p.MaxTokens, "temperature": p.Temperature,
		"messages": []map[string]string{{"role": "system", "content": prompt}, {"role": "user", "content": strings.Join(parts, "\n\n")}},
	})
	if err != nil {
		panic("jobs: encode chat body: " + err.Error())
	}
	return b
}

// generation is what llm_done keeps of a completion.
type generation struct {
	Summary           string `json:"summary"`
	CompletionID      string `json:"completion_id"`
	ProviderRequestID string `json:"provider_request_id,omitempty"`
	Model             string `json:"model"`
	OperationID       string `json:"operation_id"`
	CostMicros        int64  `json:"cost_micros"`
}

// parseCompletion reads a chat completion with the gateway's parser; the pipeline needs its
// text as well.
func parseCompletion(body []byte) (*llm.ChatCompletion, error) {
	c, err := llm.ParseChatCompletion(body)
	if err != nil {
		return nil, err
	}
	if c.Content == nil {
		return nil, fmt.Errorf("completion %s without content", c.ID)
	}
	return c, nil
}

// validation is the validated stage's result.
type validation struct {
	Summary string   `json:"summary"`
	Words   int      `json:"words"`
	Valid   bool     `json:"valid"`
	Errors  []string `json:"errors,omitempty"`
}

// validate checks a summary. Its rules are the validator's version: changing them means a
// new ValidatorVersion, which validates stored generations again without generating again.
func validate(summary string, maxChars int) validation {
	v := validation{Summary: strings.TrimSpace(summary), Words: len(strings.Fields(summary)), Valid: true}
	if v.Summary == "" {
		v.Errors = append(v.Errors, "the summary is empty")
	}
	if maxChars > 0 && utf8.RuneCountInString(v.Summary) > maxChars {
		v.Errors = append(v.Errors, fmt.Sprintf("the summary is longer than %d characters", maxChars))
	}
	v.Valid = len(v.Errors) == 0
	return v
}
