package llm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

const body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"max_tokens":100}`

func fp(t *testing.T, tenant int64, b string) string {
	t.Helper()
	f, err := FingerprintBody(tenant, []byte(b))
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return f
}

func TestFingerprintIgnoresTransportAndFormatting(t *testing.T) {
	base := fp(t, 1, body)
	same := []string{
		// key order, whitespace and number spelling do not count
		`{ "temperature": 0.70, "max_tokens": 1e2, "messages":[{"content":"hi","role":"user"}], "model":"gpt-4o-mini" }`,
		// transport and logging fields do not count
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"max_tokens":100,"stream":true,"stream_options":{"include_usage":true},"user":"u-1","metadata":{"a":"b"},"store":true,"safety_identifier":"x"}`,
		// null is absent
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"max_tokens":100,"seed":null}`,
	}
	for _, b := range same {
		if got := fp(t, 1, b); got != base {
			t.Errorf("%s: fingerprint differs from the original", b)
		}
	}
	different := map[string]string{
		"temperature":      strings.Replace(body, "0.7", "0.8", 1),
		"model":            strings.Replace(body, "gpt-4o-mini", "gpt-4o", 1),
		"messages":         strings.Replace(body, `"hi"`, `"hi!"`, 1),
		"max_tokens":       strings.Replace(body, "100", "101", 1),
		"tools":            strings.Replace(body, `"temperature"`, `"tools":[{"type":"function","function":{"name":"f"}}],"temperature"`, 1),
		"seed":             strings.Replace(body, `"temperature"`, `"seed":7,"temperature"`, 1),
		"response_format":  strings.Replace(body, `"temperature"`, `"response_format":{"type":"json_object"},"temperature"`, 1),
		"an unknown field": strings.Replace(body, `"temperature"`, `"new_knob":1,"temperature"`, 1),
	}
	for what, b := range different {
		if fp(t, 1, b) == base {
			t.Errorf("another %s gave the same fingerprint", what)
		}
	}
	if fp(t, 2, body) == base {
		t.Error("two tenants share a fingerprint")
	}
}

func TestParseRequestRefusesBadBodies(t *testing.T) {
	for b, reason := range map[string]string{
		`{`:                 ReasonMalformedJSON,
		`[]`:                ReasonMalformedJSON,
		`null`:              ReasonMalformedJSON,
		`{"messages":[{}]}`: ReasonInvalidRequest,
		`{"model":"m"}`:     ReasonInvalidRequest,
		`{"model":"m","messages":[{}],"stream":"yes"}`: ReasonInvalidRequest,
	} {
		_, err := parseRequest(chatAPI{}, []byte(b), nil)
		if ops.ErrorReason(err) != reason {
			t.Errorf("%s: got %v, want reason %s", b, err, reason)
		}
	}
}

func TestParseKey(t *testing.T) {
	for raw, want := range map[string]string{"abc": "abc", `"8e03978e-40d5"`: "8e03978e-40d5", " k 1 ": "k 1", strings.Repeat("a", 255): strings.Repeat("a", 255),
		`"abc"`: "abc", " \t\"abc\" ": "abc", `" a b "`: " a b ", `"a\"b\\c"`: `a"b\c`, `abc"`: `abc"`,
		`"` + strings.Repeat("a", 255) + `"`: strings.Repeat("a", 255)} {
		got, err := ParseKey(raw, true, true)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "  ", `""`, `"  "`, strings.Repeat("a", 256), `"` + strings.Repeat("a", 256) + `"`, "ключ", `"ключ"`,
		"a\tb", "a\nb", "a\rb", `"abc`, `"abc"x`, `"abc";p=1`, `"a\nb"`, `"\u0041"`, `"a"b"`, "\"a\tb\""} {
		if _, err := ParseKey(raw, true, true); ops.ErrorReason(err) != ReasonInvalidKey {
			t.Errorf("%q: got %v, want %s", raw, err, ReasonInvalidKey)
		}
	}
	if _, err := ParseKey("", false, true); ops.ErrorReason(err) != ReasonMissingKey {
		t.Errorf("missing key: %v", err)
	}
	if k, err := ParseKey("", false, false); err != nil || k != "" {
		t.Errorf("missing optional key: %q %v", k, err)
	}
}

func TestParsePrefer(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"wait=5": 5 * time.Second, "respond-async, wait=10": 10 * time.Second, "wait=600": time.Minute,
		"": 0, "wait=x": 0, "return=minimal": 0, `WAIT="3"`: 3 * time.Second,
	} {
		if got := ParsePrefer(h, time.Minute); got != want {
			t.Errorf("%q: got %s, want %s", h, got, want)
		}
	}
}

func TestPrices(t *testing.T) {
	p := DefaultPrices()
	u := Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 500}
	// gpt-4o-mini: 600 × 0.15 + 400 × 0.075 + 500 × 0.60 = 90 + 30 + 300 micro-dollars
	if c, ok := p.Cost("gpt-4o-mini", u); !ok || c != 420 {
		t.Fatalf("cost %d %v, want 420", c, ok)
	}
	if c, ok := p.Cost("gpt-4o-mini-2024-07-18", u); !ok || c != 420 {
		t.Fatalf("a dated snapshot cost %d %v, want 420", c, ok)
	}
	if _, ok := p.Cost("llama-unknown", u); ok {
		t.Fatal("an unknown model has a cost")
	}
	if _, err := ParsePrices([]byte(`{"models":{"m":{"input":1,"outptu":2}}}`)); err == nil {
		t.Fatal("a misspelt price parsed")
	}
}

func TestStreamAssemblesAndReplays(t *testing.T) {
	chunks := []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":1,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	}
	a := newAssembler()
	tokens := 0
	for i, c := range chunks {
		tok, usageOnly, err := a.add([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		if tok {
			tokens++
		}
		// The assembler and isUsageOnly agree on which chunk is the usage chunk.
		if usageOnly != (i == len(chunks)-1) || usageOnly != isUsageOnly([]byte(c)) {
			t.Fatalf("chunk %d: usage only %v", i, usageOnly)
		}
	}
	if tokens != 4 {
		t.Fatalf("%d chunks carried output, want 4", tokens)
	}
	c := a.completion()
	if c.ID != "chatcmpl-1" || c.Object != "chat.completion" || len(c.Choices) != 2 || *c.Choices[0].Message.Content != "Hello world" ||
		c.Choices[1].Message.ToolCalls[0].Function.Arguments != `{"a":1}` || *c.Choices[1].FinishReason != "tool_calls" {
		b, _ := json.Marshal(c)
		t.Fatalf("assembled %s", b)
	}
	body, _ := json.Marshal(c)
	evs, err := replayEvents(body, true)
	if err != nil {
		t.Fatal(err)
	}
	again := newAssembler()
	for _, e := range evs {
		if _, _, err := again.add(e); err != nil {
			t.Fatal(err)
		}
	}
	b2, _ := json.Marshal(again.completion())
	if string(b2) != string(body) {
		t.Fatalf("replay assembles to\n%s\nwant\n%s", b2, body)
	}
	if !isUsageOnly(evs[len(evs)-1]) {
		t.Fatal("the replay does not end with the usage chunk")
	}
	noUsage, _ := replayEvents(body, false)
	if len(noUsage) != len(evs)-1 {
		t.Fatalf("without include_usage: %d events, want %d", len(noUsage), len(evs)-1)
	}
	if u, ok := parseUsage(c.Usage); !ok || u.TotalTokens != 5 {
		t.Fatalf("usage %+v", u)
	}
}

func TestUpstreamBodyAsksForUsage(t *testing.T) {
	r, err := parseRequest(chatAPI{}, []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(chatAPI{}.upstreamBody(r, nil), &sent); err != nil || !sent.StreamOptions.IncludeUsage {
		t.Fatalf("upstream body lacks include_usage: %v", err)
	}
	if r.IncludeUsage {
		t.Fatal("the client did not ask for usage")
	}
}

func TestStoredRequestSplicesTheBody(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"a \"quoted\" <b> é"}]}`)
	s := stored{Mode: Batch, Route: "/v1/chat/completions", Stream: true}
	got := storedRequest(s, body)
	s.Body = body
	want, _ := json.Marshal(s)
	// The same JSON value as encoding it (which would also escape < and > as \u003c…).
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("spliced\n%s\nencoded\n%s", got, want)
	}
	var back stored
	if err := json.Unmarshal(got, &back); err != nil || back.Mode != Batch || !back.Stream || string(back.Body) != string(body) {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

func TestMessagesMustBeANonEmptyArray(t *testing.T) {
	for raw, want := range map[string]bool{`[{"role":"user"}]`: true, ` [ 1 ] `: true, `[]`: false, `[ ]`: false,
		`{}`: false, `"x"`: false, `null`: false, ``: false} {
		if got := nonEmptyArray(json.RawMessage(raw)); got != want {
			t.Errorf("nonEmptyArray(%q) = %v", raw, got)
		}
	}
}
