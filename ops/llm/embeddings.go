package llm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// embeddingsRoute is the route of embeddings.
const embeddingsRoute = "/v1/embeddings"

// EmbeddingsRoute is the gateway's route of embeddings, as its operations store it: OpenAI
// bills embeddings in a usage report of their own, which the reconciler compares with
// these calls only.
const EmbeddingsRoute = embeddingsRoute

// embeddingsAPI is POST /v1/embeddings: JSON only, never streamed. Embeddings are billed
// per input token like any generation, and a provider takes no idempotency key for them
// either, so a key gets one embedding request's bill and every repeat its stored answer.
//
// Every field but user is fingerprinted (model, input, dimensions, encoding_format and any
// other): each changes the vectors or their encoding. The user is left out as for chat
// completions; under the user key scope it is part of the key's scope instead.
type embeddingsAPI struct{}

func (embeddingsAPI) route() string { return embeddingsRoute }
func (embeddingsAPI) path() string  { return "/embeddings" }
func (embeddingsAPI) noun() string  { return "list of embeddings" }
func (embeddingsAPI) differs() string {
	return "model, input or parameters differ, or it went to another route"
}

// check wants an input: a non-empty string or a non-empty array (of strings, of token ids,
// or of token id arrays, which the provider checks further). There is no stream.
func (embeddingsAPI) check(req *request) error {
	var stream bool
	if err := unmarshalField(req.fields, "stream", &stream); err != nil || stream {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "Embeddings are answered as JSON only: leave stream out."}
	}
	raw := bytes.TrimSpace(req.fields["input"])
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "input must not be empty."}
		}
		return nil
	}
	if !nonEmptyArray(raw) {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "input must be a non-empty string or a non-empty array."}
	}
	return nil
}

func (embeddingsAPI) excluded(name string) bool { return name == "user" }

func (embeddingsAPI) upstreamBody(_ *request, original []byte) []byte { return original }

// assembler is never asked for: embeddings do not stream.
func (embeddingsAPI) assembler() streamAssembler { return nil }

// parseAnswer keeps the list as the provider sent it. It has no id of its own: the
// provider's request id names it (exchange.result).
func (embeddingsAPI) parseAnswer(body []byte) (answer, error) {
	var l struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
		Model  string            `json:"model"`
		Usage  *struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return answer{}, fmt.Errorf("decode embeddings: %w", err)
	}
	if l.Data == nil {
		return answer{}, fmt.Errorf("embeddings without data")
	}
	a := answer{body: body, model: l.Model}
	if l.Usage != nil {
		a.usage = Usage{PromptTokens: l.Usage.PromptTokens, TotalTokens: max(l.Usage.TotalTokens, l.Usage.PromptTokens)}
	}
	return a, nil
}

func (embeddingsAPI) replay([]byte, *request) ([][]byte, error) {
	return nil, fmt.Errorf("embeddings are not streamed")
}

func (embeddingsAPI) usageOnly([]byte) bool             { return false }
func (embeddingsAPI) appendFrame(b, data []byte) []byte { return appendSSE(b, data) }
func (embeddingsAPI) done() []byte                      { return nil }
func (embeddingsAPI) streamError(err error) []byte      { return chatAPI{}.streamError(err) }

// capRule: embeddings cost their input only.
func (embeddingsAPI) capRule() capRule { return capRule{noOutput: true} }
