package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

// chunkShapes are events of streamed chat completions as providers send them (fast: the
// scanner must read them itself), and odd ones it must leave to json.Unmarshal. The
// events of the Responses and Messages APIs are chunks to it with unknown fields only.
var chunkShapes = []struct {
	name, data string
	fast       bool
}{
	{"role", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}`, true},
	{"content", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`, true},
	{"escapes and non-ASCII", `{"id":"c","choices":[{"index":0,"delta":{"content":"l\u00e9 \"quoted\"\n\ud83d\ude00 été 東京"}}]}`, true},
	{"invalid UTF-8", "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xffb\"}}]}", true},
	{"refusal", `{"id":"c","choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"finish_reason":null}]}`, true},
	{"tool calls", `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":"}}]}}]}`, true},
	{"n=2", `{"id":"c","choices":[{"index":0,"delta":{"content":"A"}},{"index":1,"delta":{"content":"B"},"finish_reason":"stop"}]}`, true},
	{"logprobs", `{"id":"c","choices":[{"index":0,"delta":{"content":"A"},"logprobs":{"content":[{"token":"A","logprob":-0.25,"bytes":[65],"top_logprobs":[]}]}}]}`, true},
	{"usage only", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}`, true},
	{"whitespace", " {\n \"id\" : \"c\" ,\t\"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"x\" } } ] }\n", true},
	{"nulls", `{"id":null,"choices":null,"usage":null,"system_fingerprint":null}`, true},
	{"null delta", `{"id":"c","choices":[{"index":0,"delta":null}]}`, true},
	{"unknown nested", `{"id":"c","x":{"a":[1,-2.5e3,true,false,null,"s\\"]},"choices":[]}`, true},

	{"folded key", `{"ID":"c","choices":[]}`, false},
	{"escaped key", `{"\u0069d":"c","choices":[]}`, false},
	{"duplicate key", `{"id":"a","id":"b","choices":[]}`, false},
	{"fractional index", `{"id":"c","choices":[{"index":1.5,"delta":{}}]}`, false},
	{"wrong type", `{"id":7,"choices":[]}`, false},
	{"null choice", `{"id":"c","choices":[null]}`, false},
	{"trailing garbage", `{"id":"c","choices":[]}x`, false},
	{"bad literal", `{"id":"c","usage":nul}`, false},
	{"leading zero", `{"id":"c","created":01}`, false},
	{"unterminated", `{"id":"c","choices":[`, false},
	{"control byte", "{\"id\":\"a\tb\"}", false},
	{"not an object", `[DONE]`, false},

	// Events of the Responses and Messages APIs, whose type names the event.
	{"response event", `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`, true},
	{"message event", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, true},
	{"folded type", `{"Type":"ping"}`, true},
	{"two types", `{"type":"a","type":"b"}`, true},
	{"type not a string", `{"type":5}`, true},
}

// The chunks of a stream are read without reflection; whatever their shape, the chunk read
// is the one json.Unmarshal reads, and an event it refuses is refused with the same error,
// so the assembled answer is the same byte for byte. The type that names a Responses or
// Messages event is the one json.Unmarshal reads too.
func TestChunkDecoderReadsWhatUnmarshalReads(t *testing.T) {
	for _, c := range chunkShapes {
		t.Run(c.name, func(t *testing.T) {
			var fast chunk
			s := chunkScanner{b: []byte(c.data)}
			if took := s.chunk(&fast); took != c.fast {
				t.Errorf("the scanner read it itself: %v, want %v", took, c.fast)
			}
			sameAsUnmarshal(t, []byte(c.data))
		})
	}
}

// FuzzChunkDecoder checks that decodeChunk reads any event as json.Unmarshal does.
func FuzzChunkDecoder(f *testing.F) {
	for _, c := range chunkShapes {
		f.Add([]byte(c.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsUnmarshal(t, data) })
}

func sameAsUnmarshal(t *testing.T, data []byte) {
	t.Helper()
	var got, want chunk
	gotErr := decodeChunk(data, &got)
	wantErr := json.Unmarshal(data, &want)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("decodeChunk(%q) error %v, json.Unmarshal's %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeChunk(%q) read\n%+v\njson.Unmarshal\n%+v", data, got, want)
	}
	// After a chunk with the same head, whose strings it shares, and after one with another.
	other := "other"
	for _, prev := range []completionHead{want.completionHead, {ID: "x", Object: "y", Model: "z", SystemFingerprint: &other}} {
		var after chunk
		afterErr := decodeChunkAfter(data, &after, &prev)
		if (afterErr == nil) != (wantErr == nil) || !reflect.DeepEqual(after, want) {
			t.Fatalf("decodeChunkAfter(%q, %+v) read\n%+v (%v)\njson.Unmarshal\n%+v (%v)", data, prev, after, afterErr, want, wantErr)
		}
	}
	var ev struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &ev)
	if typ := eventType(data); typ != ev.Type {
		t.Fatalf("eventType(%q) = %q, json.Unmarshal reads %q", data, typ, ev.Type)
	}
}

// TestAStreamsChunksShareTheirHead: every chunk of a stream repeats its id, object, model
// and system fingerprint, and the assembler reads each after the first without a copy of
// them, as it reads each chunk of every stream it relays and stores (ops rule 3: the
// stored answer's usage prices the charge). A token's chunk as OpenAI sends it takes
// at most 5 allocations where it took 11.
func TestAStreamsChunksShareTheirHead(t *testing.T) {
	head := `"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_44709d6fcb"`
	a := newAssembler()
	if _, _, err := a.add([]byte(`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`)); err != nil {
		t.Fatal(err)
	}
	token := []byte(`{` + head + `,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := a.add(token); err != nil {
			t.Fatal(err)
		}
	}); n > 5 {
		t.Errorf("a token's chunk took %.0f allocations, want at most 5", n)
	}
}
