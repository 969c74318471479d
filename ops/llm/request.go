package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in bytes of the key itself.
const MaxKeyLength = 255

// ParseKey is Settle's one parser of the Idempotency-Key header, for every route that takes
// one (the chat completions gateway here, pipeline jobs in ops/jobs). raw is the header's
// value as received; present says whether the header was sent at all, and a missing key
// is an error only when required. Two header fields are sent joined by a newline and are
// refused.
//
// The IETF draft "The Idempotency-Key HTTP Header Field" makes the value a Structured
// Field sf-string (RFC 8941): a double-quoted string whose only escapes are \" and \\. For
// compatibility with clients that send the key bare (the OpenAI SDKs' examples, curl), an
// unquoted value is accepted too and taken verbatim; `"abc"` and `abc` are the same key.
// Either way:
//   - surrounding spaces and tabs (OWS) are trimmed; inside the quotes every space counts;
//   - the key is 1 to 255 printable ASCII characters (space included), not only spaces;
//   - a quoted value must be one whole sf-string: no other escape, nothing after the
//     closing quote (parameters such as `"abc";x=1` are refused).
//
// A refusal is EINVALID with reason invalid_idempotency_key (missing_idempotency_key when
// absent) and a message naming the header; the web layer answers it 400.
func ParseKey(raw string, present, required bool) (string, error) {
	if !present {
		if required {
			return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonMissingKey,
				Message: "This route needs an Idempotency-Key header: one value per user intent (a message sent, a summary asked for), reused on every retry."}
		}
		return "", nil
	}
	if strings.ContainsAny(raw, "\r\n") {
		return "", badKey("was sent more than once")
	}
	key := strings.Trim(raw, " \t")
	if strings.HasPrefix(key, `"`) {
		unq, ok := unquoteSFString(key)
		if !ok {
			return "", badKey(`is a quoted string that does not parse (escape only \" and \\, nothing after the closing quote)`)
		}
		key = unq
	}
	return key, CheckKey(key)
}

// CheckKey checks a key already taken out of its header (by ParseKey) or given by a
// program: 1 to 255 printable ASCII characters, not only spaces. Services that take a key
// from callers other than the web routes check it with this.
func CheckKey(key string) error {
	switch {
	case strings.Trim(key, " ") == "":
		return badKey("is empty")
	case len(key) > MaxKeyLength:
		return badKey(fmt.Sprintf("is longer than %d characters", MaxKeyLength))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return badKey("holds a character that is not printable ASCII")
		}
	}
	return nil
}

// unquoteSFString returns the content of s if s is exactly one RFC 8941 sf-string.
func unquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

func badKey(why string) error {
	return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidKey,
		Message: "The Idempotency-Key header " + why + "; send 1-255 printable ASCII characters, as \"key\" or bare."}
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

// request is what the gateway itself reads of a client's request, whatever its API;
// everything else is passed to the provider untouched.
type request struct {
	api          api
	Model        string
	Stream       bool
	IncludeUsage bool
	User         string
	fields       map[string]json.RawMessage
	// header reads the client's request headers (never nil); headers are those of them the
	// API passes to the provider, set by its check: they change the answer, so they are
	// fingerprinted and stored with the request.
	header        func(string) string
	headers       map[string]string
	fingerprinted map[string]any
}

// ExcludedFields are the chat completion request fields left out of the fingerprint: they
// change how the answer travels or what is logged, never the answer or its price.
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

// parseRequest reads a request body of API a: a JSON object with a model, which a checks
// further, with the request's headers (header; nil when there are none).
func parseRequest(a api, body []byte, header func(string) string) (*request, error) {
	malformed := &ops.Error{Code: ops.EINVALID, Reason: "malformed_json", Message: "The body is not a JSON object."}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, malformed
	}
	// Every value is stored as it came; Postgres refuses bytes that are not UTF-8 and an
	// escaped NUL, so both are the client's error, named, never the database's.
	for name, raw := range fields {
		if err := ops.CheckJSONText(name, raw); err != nil {
			return nil, err
		}
	}
	if !utf8.Valid(body) {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: ops.ReasonInvalidField, Message: "The body is not valid UTF-8."}
	}
	if header == nil {
		header = func(string) string { return "" }
	}
	req := &request{api: a, fields: fields, header: header}
	if err := unmarshalField(fields, "model", &req.Model); err != nil || strings.TrimSpace(req.Model) == "" {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: "invalid_request", Message: "model must be a non-empty string."}
	}
	if err := ops.CheckRef("model", req.Model, 256); err != nil {
		return nil, err
	}
	if err := a.check(req); err != nil {
		return nil, err
	}
	_ = unmarshalField(fields, "user", &req.User)
	if err := ops.CheckRef("user", req.User, 256); err != nil {
		return nil, err
	}

	// The body is decoded once more, whole, with its numbers kept as they were written
	// (one decoder, where one per field allocated a buffer each); a top-level key given
	// twice keeps its last value, as in fields.
	v, err := canonical(body)
	fp, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, malformed
	}
	for name, v := range fp {
		if a.excluded(name) || v == nil {
			delete(fp, name)
		}
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

// excluded reports whether name is one of fields.
func excluded(fields []string, name string) bool {
	for _, f := range fields {
		if f == name {
			return true
		}
	}
	return false
}

// Fingerprint returns the request's fingerprint for a tenant: SHA-256 over the canonical
// JSON of every fingerprinted field (see ExcludedFields). A route other than chat
// completions is fingerprinted too, so a key first used on one route is refused on
// another, never answered with the other route's result; chat completions' fingerprints
// stay as they were before there were other routes. So are the headers the API passes to
// the provider, which change the answer as a field does.
func (r *request) Fingerprint(tenantID int64) string {
	m := make(map[string]any, len(r.fingerprinted)+3)
	for k, v := range r.fingerprinted {
		m[k] = v
	}
	m["settle_tenant_id"] = tenantID
	if route := r.api.route(); route != chatRoute {
		m["settle_route"] = route
	}
	if len(r.headers) > 0 {
		m["settle_headers"] = r.headers
	}
	return ops.Fingerprint(m)
}

// FingerprintBody is the fingerprint of a raw chat completion request body for a tenant,
// for tools and tests that compare requests the way the gateway does.
func FingerprintBody(tenantID int64, body []byte) (string, error) {
	r, err := parseRequest(chatAPI{}, body, nil)
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

// refSourceName is what a refusal of a request reference calls it: the header it came
// from, when the caller named one.
func refSourceName(from string) string {
	if from == "" {
		return "request reference"
	}
	return from
}
