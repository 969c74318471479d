package llm

import (
	"encoding/json"
	"testing"
)

// usageByUnmarshal is what parseUsage read with json.Unmarshal alone.
func usageByUnmarshal(raw []byte) (Usage, bool) {
	var u struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out, true
}

// openAIUsage is a chat completion's usage as OpenAI sends it.
const openAIUsage = `{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`

// TestUsageIsReadAsUnmarshalReadsIt: a call's tokens, from which its charge is priced
// (ops rule 3), are read from the provider's usage without reflection, and every shape is
// read as json.Unmarshal read it: the odd ones (keys in another case or given twice, numbers
// that are not plain integers, values of the wrong type, malformed JSON) by json.Unmarshal
// itself. OpenAI's usage is read without an allocation, where json.Unmarshal took several.
func TestUsageIsReadAsUnmarshalReadsIt(t *testing.T) {
	for _, raw := range []string{
		openAIUsage,
		`{"prompt_tokens":5,"completion_tokens":7}`,
		` { "prompt_tokens" : 5 , "total_tokens" : 0 } `,
		`{}`, `null`, ` null`, ``, `[]`, `"x"`, `5`,
		`{"prompt_tokens":null,"completion_tokens":2}`,
		`{"prompt_tokens_details":null,"prompt_tokens":1}`,
		`{"prompt_tokens_details":{},"prompt_tokens":1}`,
		`{"prompt_tokens_details":{"cached_tokens":null}}`,
		`{"prompt_tokens_details":{"Cached_Tokens":4}}`,
		`{"prompt_tokens_details":{"cached_tokens":4,"cached_tokens":6}}`,
		`{"prompt_tokens_details":[1]}`,
		`{"Prompt_Tokens":9}`,
		`{"PROMPT_TOKENS":9,"prompt_tokens":3}`,
		`{"prompt_tokens":3,"prompt_tokens":4}`,
		`{"prompt_tokens":1.5}`, `{"prompt_tokens":1e2}`, `{"prompt_tokens":-3}`,
		`{"prompt_tokens":"3"}`, `{"prompt_tokens":99999999999999999999}`,
		`{"prompt_tokens":3,}`, `{"prompt_tokens":3`, `{"prompt_tokens":3} x`,
		`{"pr\u006fmpt_tokens":8}`, `{"prompt_tokens":2,"extra":{"a":[1,"b",{"c":null}]}}`,
		`{"prompt_tokens":2,"extra":"bad \x01 control"}`,
	} {
		got, gotOK := parseUsage(json.RawMessage(raw))
		want, wantOK := usageByUnmarshal([]byte(raw))
		if got != want || gotOK != wantOK {
			t.Errorf("%s: read as %+v, %v; json.Unmarshal reads %+v, %v", raw, got, gotOK, want, wantOK)
		}
	}
	raw := json.RawMessage(openAIUsage)
	if n := testing.AllocsPerRun(100, func() { parseUsage(raw) }); n != 0 {
		t.Errorf("reading OpenAI's usage took %.0f allocations, want 0", n)
	}
}

// FuzzUsage compares parseUsage with json.Unmarshal on any input (ops rule 3: the charge is
// priced from what it reads): go test ./ops/llm -run '^$' -fuzz FuzzUsage.
func FuzzUsage(f *testing.F) {
	for _, s := range []string{openAIUsage, `{"prompt_tokens":1,"Prompt_Tokens":2}`, `{"prompt_tokens_details":{"cached_tokens":1}}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, gotOK := parseUsage(json.RawMessage(raw))
		want, wantOK := usageByUnmarshal([]byte(raw))
		if got != want || gotOK != wantOK {
			t.Errorf("%q: read as %+v, %v; json.Unmarshal reads %+v, %v", raw, got, gotOK, want, wantOK)
		}
	})
}
