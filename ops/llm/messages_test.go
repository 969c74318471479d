package llm

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// headers is a request's headers as web reads them.
func headers(h map[string]string) func(string) string {
	return func(name string) string { return h[name] }
}

// A Messages API request's fingerprint covers every field but stream and metadata, and the
// anthropic-version and anthropic-beta headers it is sent with: the default version when the
// client sent none, and its betas in any order.
func TestMessagesFingerprint(t *testing.T) {
	fp := func(body string, h map[string]string) string {
		t.Helper()
		r, err := parseRequest(messagesAPI{}, []byte(body), headers(h))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r.Fingerprint(1)
	}
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}]}`
	base := fp(body, nil)
	for _, same := range []struct {
		body string
		h    map[string]string
	}{
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":64.0,"model":"claude-sonnet-4-5","stream":true}`, nil},
		{`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u-1"}}`, nil},
		{body, map[string]string{"anthropic-version": DefaultAnthropicVersion}},
	} {
		if fp(same.body, same.h) != base {
			t.Errorf("%s %v changed the fingerprint", same.body, same.h)
		}
	}
	if fp(body, map[string]string{"anthropic-beta": "b, a"}) != fp(body, map[string]string{"anthropic-beta": "a,b,a"}) {
		t.Error("the order of the betas changed the fingerprint")
	}
	for _, other := range []struct {
		body string
		h    map[string]string
	}{
		{`{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}]}`, nil},
		{`{"model":"claude-sonnet-4-5","max_tokens":65,"messages":[{"role":"user","content":"x"}]}`, nil},
		{`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}],"system":"be brief"}`, nil},
		{`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}],"top_k":5}`, nil},
		{`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":1024}}`, nil},
		{body, map[string]string{"anthropic-beta": "context-1m-2025-08-07"}},
		{body, map[string]string{"anthropic-version": "2023-01-01"}},
	} {
		if fp(other.body, other.h) == base {
			t.Errorf("%s %v has the fingerprint of another request", other.body, other.h)
		}
	}
	if fp(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, nil) ==
		func() string {
			r, _ := parseRequest(chatAPI{}, []byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`), nil)
			return r.Fingerprint(1)
		}() {
		t.Error("a message and a chat completion share a fingerprint")
	}
	for _, bad := range []string{`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":64,"messages":[]}`, `{"model":"m","max_tokens":64,"messages":[{}],"stream":1}`,
		`{"model":"m","max_tokens":64,"messages":[{}],"metadata":"u"}`} {
		if _, err := parseRequest(messagesAPI{}, []byte(bad), nil); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	r, _ := parseRequest(messagesAPI{}, []byte(`{"model":"m","max_tokens":64,"messages":[{}],"metadata":{"user_id":"u-9"}}`), nil)
	if r.User != "u-9" || r.headers["anthropic-version"] != DefaultAnthropicVersion {
		t.Errorf("user %q, headers %v", r.User, r.headers)
	}
}

// storedMessage is a message with a text block with a citation, a thinking block and a tool
// call, its prompt partly read from and partly written to the cache.
const storedMessage = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"thinking","thinking":"the order is late","signature":"sig=="},` +
	`{"type":"text","text":"Order 4417 is late.","citations":[{"type":"char_location","cited_text":"late","document_index":0}]},` +
	`{"type":"tool_use","id":"toolu_01","name":"refund","input":{"order":"4417","amount":12.5}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,` +
	`"usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":5000,"output_tokens":40,` +
	`"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500}}}`

// A stored message replays as the events of its stream, and those events assemble back into
// the same message: a streamed answer stores what a JSON one does.
func TestMessagesReplayAssemblesBack(t *testing.T) {
	evs, err := messagesAPI{}.replay([]byte(storedMessage), nil)
	if err != nil {
		t.Fatal(err)
	}
	asm := messagesAPI{}.assembler()
	tokens := 0
	for i, d := range evs {
		token, _, err := asm.add(d)
		if err != nil {
			t.Fatalf("event %d %s: %v", i, d, err)
		}
		if token {
			tokens++
		}
		if asm.whole() != (i == len(evs)-1) {
			t.Fatalf("whole after event %d of %d", i+1, len(evs))
		}
	}
	if asm.id() != "msg_01" || tokens != 3 {
		t.Fatalf("id %q, %d events with output", asm.id(), tokens)
	}
	got, err := asm.answer()
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(got.body, &a)
	_ = json.Unmarshal([]byte(storedMessage), &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("assembled\n%s\nstored\n%s", ja, jb)
	}
	want := Usage{PromptTokens: 7100, CompletionTokens: 40, CachedTokens: 5000, CacheWriteTokens: 2000, CacheWrite1hTokens: 500, TotalTokens: 7140}
	if got.usage != want || got.id != "msg_01" {
		t.Fatalf("usage %+v, want %+v", got.usage, want)
	}
}

// A message is priced per kind of token: claude-sonnet-4-5's $3 per million uncached input
// tokens, $0.30 read from the cache, $3.75 written for five minutes, $6 for an hour, $15 out.
func TestMessagesCostCountsTheCache(t *testing.T) {
	a, err := parseMessage([]byte(storedMessage))
	if err != nil {
		t.Fatal(err)
	}
	got, known := DefaultPrices().Cost("claude-sonnet-4-5-20250929", a.usage)
	want := int64(math.Round(100*3 + 5000*0.30 + 1500*3.75 + 500*6 + 40*15))
	if !known || got != want {
		t.Fatalf("cost %d (%v), want %d", got, known, want)
	}
	// A chat completion's usage, without cache writes, costs what it did.
	if c, _ := DefaultPrices().Cost("gpt-4o-mini", Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 500}); c != int64(math.Round(600*0.15+400*0.075+500*0.6)) {
		t.Fatalf("chat completion cost %d", c)
	}
}

// A stream is not a message until message_stop: cut before it, it assembles to nothing, and
// an error event is the provider's word that the generation failed.
func TestMessagesStreamCutOrFailed(t *testing.T) {
	evs, _ := messagesAPI{}.replay([]byte(storedMessage), nil)
	asm := messagesAPI{}.assembler()
	for _, d := range evs[:len(evs)-1] {
		if _, _, err := asm.add(d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := asm.answer(); err == nil || asm.whole() {
		t.Fatal("a stream without message_stop made a message")
	}
	if _, _, err := asm.add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); !errors.Is(err, ErrStreamFailed) {
		t.Fatalf("error event: %v", err)
	}
	if _, _, err := (&messagesAssembler{}).add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`)); err == nil {
		t.Fatal("a delta before message_start was taken")
	}
}
