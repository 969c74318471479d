package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

// openAICompletion is a chat completion as OpenAI answers it.
const openAICompletion = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I assist you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":` + openAIUsage + `,"service_tier":"default","system_fingerprint":"fp_44709d6fcb"}`

// completionShapes are answers decodeCompletion must read as json.Unmarshal does.
var completionShapes = []string{
	openAICompletion,
	`{"id":"c","choices":[]}`,
	`{"id":"c","choices":null}`,
	`{"id":"c"}`,
	` { "id" : "c" , "choices" : [ { "index" : 1 , "message" : null } ] } `,
	`{"id":"c","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`,
	`{"id":"c","choices":[{"message":{"tool_calls":null,"audio":{"id":"a","data":"x"}}}]}`,
	`{"id":"c","choices":[{"message":{"tool_calls":[{"function":{"arguments":5}}]}}]}`,
	`{"id":"c","choices":[{"message":{"content":"esc\u00e9aped \"q\""}}]}`,
	"{\"id\":\"c\",\"choices\":[{\"message\":{\"content\":\"bad \xff utf-8\"}}]}",
	`{"id":"c","choices":[{"logprobs":{"content":[{"token":"a","logprob":-0.1}]}}]}`,
	`{"ID":"c","choices":[]}`,
	`{"id":"c","Choices":[]}`,
	`{"id":"c","id":"d","choices":[]}`,
	`{"id":"c","choices":[{"index":0,"index":1}]}`,
	`{"id":"c","choices":[{"message":{"Content":"x"}}]}`,
	`{"id":5,"choices":[]}`,
	`{"id":"c","created":1.5,"choices":[]}`,
	`{"id":"c","choices":{}}`,
	`{"id":"c","choices":[{"index":"0"}]}`,
	`{"id":"c","choices":[]} x`,
	`{"id":"c","choices":[],}`,
	`{"id":"c","choices":[`,
	`[]`, `null`, ``,
	`{"id":"c","usage":null,"system_fingerprint":null,"service_tier":null,"choices":[]}`,
	`{"id":"c","extra":{"deep":[1,2,{"x":[true,false,null]}]},"choices":[]}`,
}

// TestACompletionIsReadAsUnmarshalReadsIt: a whole chat completion, whose usage prices its
// charge (ops rule 3) and whose id and choices say it is an answer at all, is read without
// reflection, and every shape as json.Unmarshal reads it, errors included: the odd ones by
// json.Unmarshal itself. OpenAI's answer takes at most three quarters of json.Unmarshal's
// allocations.
func TestACompletionIsReadAsUnmarshalReadsIt(t *testing.T) {
	for _, data := range completionShapes {
		sameCompletionAsUnmarshal(t, []byte(data))
	}
	body := []byte(openAICompletion)
	scanned := testing.AllocsPerRun(100, func() {
		var c completion
		_ = decodeCompletion(body, &c)
	})
	unmarshalled := testing.AllocsPerRun(100, func() {
		var c completion
		_ = json.Unmarshal(body, &c)
	})
	if scanned > unmarshalled*3/4 {
		t.Errorf("reading OpenAI's answer took %.0f allocations, json.Unmarshal %.0f: want at most three quarters", scanned, unmarshalled)
	}
}

// FuzzCompletionDecoder checks that decodeCompletion reads any answer as json.Unmarshal does
// (ops rule 3): go test ./ops/llm -run '^$' -fuzz FuzzCompletionDecoder.
func FuzzCompletionDecoder(f *testing.F) {
	for _, s := range completionShapes {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameCompletionAsUnmarshal(t, data) })
}

func sameCompletionAsUnmarshal(t *testing.T, data []byte) {
	t.Helper()
	var got, want completion
	gotErr := decodeCompletion(data, &got)
	wantErr := json.Unmarshal(data, &want)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("decodeCompletion(%q) error %v, json.Unmarshal's %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeCompletion(%q) read\n%+v\njson.Unmarshal\n%+v", data, got, want)
	}
}
