package llm

import (
	"bytes"
	"encoding/json"

	"github.com/settle-dev/settle/ops"
)

// chatRoute is the route of chat completions, the gateway's first API.
const chatRoute = "/v1/chat/completions"

// chatAPI is POST /v1/chat/completions: JSON, or an SSE stream of chunks ending with
// [DONE]. Its requests, answers and chunks are read in request.go and completion.go.
type chatAPI struct{}

func (chatAPI) route() string   { return chatRoute }
func (chatAPI) path() string    { return ChatPath }
func (chatAPI) noun() string    { return "chat completion" }
func (chatAPI) differs() string { return "model, messages or parameters differ" }

// check wants at least one message, and reads the stream flags.
func (chatAPI) check(req *request) error {
	if !nonEmptyArray(req.fields["messages"]) {
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "messages must be a non-empty array."}
	}
	if err := unmarshalField(req.fields, "stream", &req.Stream); err != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "stream must be true or false."}
	}
	// Read by its exact name, as the provider reads it: a struct would take any case and the
	// last of two spellings, and a stream the gateway believed asked for usage would come
	// back without it, its tokens and cost unrecorded.
	var so map[string]json.RawMessage
	var include bool
	if err := unmarshalField(req.fields, "stream_options", &so); err != nil || unmarshalField(so, "include_usage", &include) != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "stream_options must be an object whose include_usage is true or false."}
	}
	req.IncludeUsage = include
	return nil
}

func (chatAPI) excluded(name string) bool { return excluded(ExcludedFields, name) }

// upstreamBody is the client's body, with usage asked for on a stream so that every
// generation's tokens and cost are known.
func (chatAPI) upstreamBody(r *request, original []byte) []byte {
	if !r.Stream || r.IncludeUsage {
		return original
	}
	if b, ok := withUsageAsked(r, original); ok {
		return b
	}
	fields := make(map[string]json.RawMessage, len(r.fields))
	for k, v := range r.fields {
		fields[k] = v
	}
	var so map[string]json.RawMessage
	_ = unmarshalField(fields, "stream_options", &so)
	if so == nil {
		so = map[string]json.RawMessage{}
	}
	so["include_usage"] = json.RawMessage("true")
	fields["stream_options"], _ = json.Marshal(so)
	b, err := json.Marshal(fields)
	if err != nil {
		return original
	}
	return b
}

// askUsage is the member a stream's body gains when its client named no stream_options.
const askUsage = `"stream_options":{"include_usage":true}`

// withUsageAsked is original, a JSON object parseRequest read into r, with askUsage added
// as its last member, when the client named no stream_options (most streaming clients).
// The bytes before it are the client's as sent, so the provider reads every other field
// as it would have; decoding the body's fields and encoding them again cost a streamed
// call a copy of its fields, a sort and a second check of every value. A body that names
// stream_options keeps the path that rewrites it.
func withUsageAsked(r *request, original []byte) ([]byte, bool) {
	if _, named := r.fields["stream_options"]; named {
		return nil, false
	}
	return appendMember(original, askUsage)
}

// appendMember is original, a JSON object, with member ("name":value) added as its last
// member, the bytes before it as they were; false when original is no object.
func appendMember(original []byte, member string) ([]byte, bool) {
	end := bytes.LastIndexByte(original, '}')
	if end < 0 {
		return nil, false
	}
	head := bytes.TrimRight(original[:end], " \t\r\n")
	if len(head) == 0 {
		return nil, false
	}
	out := make([]byte, 0, len(original)+len(member)+1)
	out = append(out, head...)
	if head[len(head)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, original[end:]...), true
}

// setMember is body, a JSON object, decoded and encoded again with its member name set to
// value; body itself when it does not decode.
func setMember(body []byte, name string, value json.RawMessage) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return body
	}
	fields[name] = value
	b, err := json.Marshal(fields)
	if err != nil {
		return body
	}
	return b
}

func (chatAPI) assembler() streamAssembler { return newAssembler() }

// parseAnswer keeps a completion as the provider sent it.
func (chatAPI) parseAnswer(body []byte) (answer, error) {
	c, err := parseCompletion(body)
	if err != nil {
		return answer{}, err
	}
	u, _ := parseUsage(c.Usage)
	return answer{body: body, id: c.ID, model: c.Model, usage: u}, nil
}

func (chatAPI) replay(stored []byte, req *request) ([][]byte, error) {
	return replayEvents(stored, req.IncludeUsage)
}

func (chatAPI) usageOnly(data []byte) bool        { return isUsageOnly(data) }
func (chatAPI) appendFrame(b, data []byte) []byte { return appendSSE(b, data) }
func (chatAPI) done() []byte                      { return doneEvent }

// streamError is an error event, as OpenAI-compatible providers end a stream that failed.
func (chatAPI) streamError(err error) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": ops.ErrorMessage(err),
		"type": "settle_error", "code": ops.ErrorReason(err)}})
	return sse(b)
}

// capRule: a chat completion's answers are capped by max_completion_tokens or the older
// max_tokens, each of its n answers.
func (chatAPI) capRule() capRule {
	return capRule{names: []string{"max_completion_tokens", "max_tokens"}, set: "max_completion_tokens", min: 1, choices: "n"}
}
