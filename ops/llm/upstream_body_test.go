package llm

import (
	"encoding/json"
	"testing"
)

// TestAStreamIsSentTheClientsBytesWithUsageAsked: a streamed chat completion whose client
// named no stream_options goes to the provider as the client wrote it, with usage asked for
// as its last member, so that the generation's tokens and cost, from which its charge is
// priced (ops rule 3), are known. The body is not decoded and encoded again on the way: that
// cost a streamed call a copy of its fields, a sort and a second check of every value.
func TestAStreamIsSentTheClientsBytesWithUsageAsked(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model": "m", "messages": [{"role":"user","content":"x"}], "stream": true}`,
			`{"model": "m", "messages": [{"role":"user","content":"x"}], "stream": true,"stream_options":{"include_usage":true}}`},
		{"{\"stream\":true,\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"}\"}]}\n",
			"{\"stream\":true,\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"}\"}],\"stream_options\":{\"include_usage\":true}}\n"},
	} {
		r, err := parseRequest(chatAPI{}, []byte(c.body), nil)
		if err != nil {
			t.Fatal(err)
		}
		up := chatAPI{}.upstreamBody(r, []byte(c.body))
		if string(up) != c.want {
			t.Errorf("sent upstream:\n%s\nwant\n%s", up, c.want)
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(up, &sent); err != nil || string(sent["stream_options"]) != `{"include_usage":true}` {
			t.Errorf("the provider is sent %s (%v), which asks for no usage", up, err)
		}
		if n := testing.AllocsPerRun(100, func() { chatAPI{}.upstreamBody(r, []byte(c.body)) }); n > 1 {
			t.Errorf("the body sent upstream took %.0f allocations, want 1", n)
		}
	}
}
