package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// responsesRoute is the route of OpenAI's Responses API.
const responsesRoute = "/v1/responses"

// responsesAPI is POST /v1/responses: a response as JSON, or a stream of typed events
// (event: response.created, response.output_text.delta, …, response.completed) that ends
// with the response itself and no [DONE]. The provider names a response (resp_…) in its first
// event, before anything is generated, so every attempt's response id is known even when
// the stream breaks later; the provider keeps it (unless the client sent store: false), to be
// read again at GET /v1/responses/{id}.
//
// Every field is fingerprinted (model, input, instructions, tools, tool_choice,
// previous_response_id, reasoning, max_output_tokens, text, temperature, top_p, include,
// truncation, prompt, service_tier, prompt_cache_key and any other) but those of
// ExcludedFields, which change how the answer travels or what is logged: stream,
// stream_options, user, safety_identifier, metadata and store.
//
// A background response (background: true) is fingerprinted with its background flag and
// answered as the provider answers it, queued or as its stream, then followed at the
// provider to its end (responses_background.go); one that asks the provider not to keep it
// (store: false) is refused, since nothing could be read again.
type responsesAPI struct{}

func (responsesAPI) route() string { return responsesRoute }
func (responsesAPI) path() string  { return "/responses" }
func (responsesAPI) noun() string  { return "response" }
func (responsesAPI) differs() string {
	return "model, input, instructions or parameters differ, or it went to another route"
}

// check reads the stream flag and refuses a background response the provider would not
// keep.
func (responsesAPI) check(req *request) error {
	if err := unmarshalField(req.fields, "stream", &req.Stream); err != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "stream must be true or false."}
	}
	var background bool
	var store *bool
	if err := unmarshalField(req.fields, "background", &background); err != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "background must be true or false."}
	}
	if background && unmarshalField(req.fields, "store", &store) == nil && store != nil && !*store {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest,
			Message: "A background response is read again at the provider until it ends: leave store out, or set it true."}
	}
	// Responses carry their usage in their last event: there is nothing to ask for.
	req.IncludeUsage = true
	return nil
}

func (responsesAPI) excluded(name string) bool { return excluded(ExcludedFields, name) }

func (responsesAPI) upstreamBody(_ *request, original []byte) []byte { return original }

func (responsesAPI) assembler() streamAssembler { return &responsesAssembler{} }

func (responsesAPI) parseAnswer(body []byte) (answer, error) { return parseResponse(body) }

func (responsesAPI) usageOnly([]byte) bool { return false }

func (responsesAPI) appendFrame(b, data []byte) []byte { return appendTypedSSE(b, data) }

func (responsesAPI) done() []byte { return nil }

// streamError is the Responses API's error event.
func (a responsesAPI) streamError(err error) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": ops.ErrorReason(err), "message": ops.ErrorMessage(err), "param": nil})
	return typedSSE(b)
}

// response is what the gateway reads of a response object.
type response struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Model  string `json:"model"`
	Usage  *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
}

// parseResponse reads a finished response: completed, or incomplete (cut short by
// max_output_tokens or a content filter, and billed as far as it went). Any other status is
// not an answer.
func parseResponse(body []byte) (answer, error) {
	a, status, err := readResponse(body)
	if err != nil {
		return answer{}, err
	}
	if status != "completed" && status != "incomplete" {
		return answer{}, fmt.Errorf("response %s is %q", a.id, status)
	}
	return a, nil
}

// readResponse reads a response in any status, with its status and the usage it reports.
func readResponse(body []byte) (answer, string, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return answer{}, "", fmt.Errorf("decode response: %w", err)
	}
	if r.ID == "" || r.Object != "response" {
		return answer{}, "", fmt.Errorf("not a response")
	}
	a := answer{body: body, id: r.ID, model: r.Model}
	if u := r.Usage; u != nil {
		a.usage = Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
		if u.InputTokensDetails != nil {
			a.usage.CachedTokens = u.InputTokensDetails.CachedTokens
		}
		if a.usage.TotalTokens == 0 {
			a.usage.TotalTokens = u.InputTokens + u.OutputTokens
		}
	}
	return a, r.Status, nil
}

// responsesAssembler follows a response's stream: the response's id from its first event,
// and the response itself from its last (response.completed or response.incomplete). An
// error event or response.failed ends the attempt: the provider says the generation failed,
// after billing what it generated.
type responsesAssembler struct {
	respID string
	final  json.RawMessage
	events int
}

func (a *responsesAssembler) add(data []byte) (token, usageOnly bool, err error) {
	var ev struct {
		Type     string `json:"type"`
		Response *struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
		return false, false, fmt.Errorf("event %d is not a response event", a.events+1)
	}
	a.events++
	if a.respID == "" && ev.Response != nil {
		a.respID = ev.Response.ID
	}
	switch ev.Type {
	case "response.completed", "response.incomplete":
		var whole struct {
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(data, &whole); err != nil {
			return false, false, err
		}
		a.final = whole.Response
	case "error", "response.failed":
		return false, false, fmt.Errorf("%w (%s)", ErrStreamFailed, ev.Type)
	}
	return strings.HasSuffix(ev.Type, ".delta"), false, nil
}

func (a *responsesAssembler) whole() bool { return a.final != nil }

func (a *responsesAssembler) id() string { return a.respID }

func (a *responsesAssembler) answer() (answer, error) {
	if a.final == nil {
		return answer{}, fmt.Errorf("stream without its response")
	}
	return parseResponse(bytes.Clone(a.final))
}

// capRule: a response is capped by max_output_tokens, which the provider takes from 16.
func (responsesAPI) capRule() capRule {
	return capRule{names: []string{"max_output_tokens"}, set: "max_output_tokens", min: 16}
}
