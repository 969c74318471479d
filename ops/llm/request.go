package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// MaxKeyLength is the longest Idempotency-Key accepted.
const MaxKeyLength = 255

// ParseKey validates an Idempotency-Key header value as the IETF draft describes it: a
// structured-field string, quoted or not, of 1 to 255 printable ASCII characters. present
// says whether the header was sent at all; a missing key is an error only when required.
func ParseKey(raw string, present, required bool) (string, error) {
	if !present {
		if required {
			return "", &ops.Error{Code: ops.EINVALID, Reason: "missing_idempotency_key",
				Message: "This route needs an Idempotency-Key header: one value per user intent (a message sent, a summary asked for), reused on every retry."}
		}
		return "", nil
	}
	key := strings.TrimSpace(raw)
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		unq, err := strconv.Unquote(key)
		if err != nil {
			return "", badKey("is a quoted string that does not parse")
		}
		key = unq
	}
	switch {
	case key == "" || strings.TrimSpace(key) == "":
		return "", badKey("is empty")
	case len(key) > MaxKeyLength:
		return "", badKey(fmt.Sprintf("is longer than %d characters", MaxKeyLength))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", badKey("holds a character that is not printable ASCII")
		}
	}
	return key, nil
}

func badKey(why string) error {
	return &ops.Error{Code: ops.EINVALID, Reason: "invalid_idempotency_key",
		Message: "The Idempotency-Key header " + why + "; send 1-255 printable ASCII characters."}
}

// ParsePrefer returns the wait the client asks for with `Prefer: wait=N` (RFC 7240), capped
// at max; zero when it asks for none.
func ParsePrefer(header string, max time.Duration) time.Duration {
	for _, pref := range strings.Split(header, ",") {
		token, _, _ := strings.Cut(pref, ";")
		name, value, ok := strings.Cut(strings.TrimSpace(token), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(value), `"`))
		if err != nil || n <= 0 {
			return 0
		}
		d := time.Duration(n) * time.Second
		if d > max {
			d = max
		}
		return d
	}
	return 0
}

// chatRequest is what the gateway itself reads of a chat completion request; everything
// else is passed to the provider untouched.
type chatRequest struct {
	Model         string
	Stream        bool
	IncludeUsage  bool
	User          string
	fields        map[string]json.RawMessage
	fingerprinted map[string]any
}

// ExcludedFields are the request fields left out of the fingerprint: they change how the
// answer travels or what is logged, never the answer or its price.
//
//	stream, stream_options  transport: a stored completion is replayed as JSON or SSE alike
//	user, safety_identifier end-user ids for the provider's abuse monitoring
//	metadata                tags for the provider's dashboards
//	store                   whether the provider keeps a copy for its own tools
//
// Every other field is fingerprinted, including ones Settle does not know yet, because an
// unknown field may change the answer. The ones known to matter: model, messages, tools,
// tool_choice, parallel_tool_calls, functions, function_call, temperature, top_p,
// max_tokens, max_completion_tokens, n, stop, seed, response_format, presence_penalty,
// frequency_penalty, logit_bias, logprobs, top_logprobs, reasoning_effort, service_tier,
// modalities, audio, prediction, web_search_options, verbosity, prompt_cache_key. The
// tenant id is fingerprinted too, so a fingerprint never matches across tenants.
//
// Normalisation: key order and whitespace do not count, numbers compare by value (1, 1.0
// and 1e0 are equal), and a top-level field set to null counts as absent. Message content
// given as a string and as a list of text parts are different requests.
var ExcludedFields = []string{"stream", "stream_options", "user", "safety_identifier", "metadata", "store"}

// parseRequest reads a chat completion body: a JSON object with a model and at least one
// message.
func parseRequest(body []byte) (*chatRequest, error) {
	malformed := &ops.Error{Code: ops.EINVALID, Reason: "malformed_json", Message: "The body is not a JSON object."}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, malformed
	}
	req := &chatRequest{fields: fields}
	if err := unmarshalField(fields, "model", &req.Model); err != nil || strings.TrimSpace(req.Model) == "" {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "model must be a non-empty string."}
	}
	if !nonEmptyArray(fields["messages"]) {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "messages must be a non-empty array."}
	}
	if err := unmarshalField(fields, "stream", &req.Stream); err != nil {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "stream must be true or false."}
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if err := unmarshalField(fields, "stream_options", &so); err != nil {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "stream_options must be an object."}
	}
	req.IncludeUsage = so.IncludeUsage
	_ = unmarshalField(fields, "user", &req.User)

	fp := make(map[string]any, len(fields))
	for name, raw := range fields {
		if excluded(name) || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		v, err := canonical(raw)
		if err != nil {
			return nil, malformed
		}
		fp[name] = v
	}
	req.fingerprinted = fp
	return req, nil
}

// nonEmptyArray reports whether raw, valid JSON, is an array with at least one element,
// without decoding the elements: the messages are most of a request's bytes.
func nonEmptyArray(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) > 0
}

func unmarshalField(fields map[string]json.RawMessage, name string, v any) error {
	raw, ok := fields[name]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return json.Unmarshal(raw, v)
}

func excluded(name string) bool {
	for _, f := range ExcludedFields {
		if f == name {
			return true
		}
	}
	return false
}

// Fingerprint returns the request's fingerprint for a tenant: SHA-256 over the canonical
// JSON of every fingerprinted field (see ExcludedFields).
func (r *chatRequest) Fingerprint(tenantID int64) string {
	m := make(map[string]any, len(r.fingerprinted)+1)
	for k, v := range r.fingerprinted {
		m[k] = v
	}
	m["settle_tenant_id"] = tenantID
	return ops.Fingerprint(m)
}

// FingerprintBody is the fingerprint of a raw request body for a tenant, for tools and
// tests that compare requests the way the gateway does.
func FingerprintBody(tenantID int64, body []byte) (string, error) {
	r, err := parseRequest(body)
	if err != nil {
		return "", err
	}
	return r.Fingerprint(tenantID), nil
}

// canonical decodes raw JSON with numbers normalised by value.
func canonical(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalise(v), nil
}

func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalise(e)
		}
		return x
	case json.Number:
		return canonicalNumber(x)
	}
	return v
}

func canonicalNumber(n json.Number) json.Number {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return json.Number(strconv.FormatInt(i, 10))
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return n
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return json.Number(strconv.FormatInt(int64(f), 10))
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// upstreamBody is the body sent to the provider: the client's, with usage asked for on a
// stream so that every generation's tokens and cost are known.
func (r *chatRequest) upstreamBody(original []byte) []byte {
	if !r.Stream || r.IncludeUsage {
		return original
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
