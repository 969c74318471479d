package llm

import (
	"encoding/json"
	"testing"
)

// TestStreamAsksForUsageAsTheProviderReadsIt: the provider reads stream_options'
// include_usage by its exact name, where Go's decoding into a struct takes any case and the
// last of two spellings. A client that writes "Include_Usage": true, or include_usage false
// and then another spelling true, must not make the gateway believe usage was asked for:
// the provider would send none, and the call's tokens and cost would go unrecorded (a
// tenant's spend that its own request hid). The stream sent upstream asks for usage in the
// provider's spelling.
func TestStreamAsksForUsageAsTheProviderReadsIt(t *testing.T) {
	for _, so := range []string{`{"Include_Usage":true}`, `{"include_usage":false,"INCLUDE_USAGE":true}`} {
		body := `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":` + so + `}`
		r, err := parseRequest(chatAPI{}, []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		var sent struct {
			StreamOptions map[string]json.RawMessage `json:"stream_options"`
		}
		up := chatAPI{}.upstreamBody(r, []byte(body))
		if err := json.Unmarshal(up, &sent); err != nil || string(sent.StreamOptions["include_usage"]) != "true" {
			t.Errorf("stream_options %s: the provider is sent %s, which asks for no usage", so, up)
		}
		if r.IncludeUsage {
			t.Errorf("stream_options %s: read as the client asking for usage, which the provider does not read so", so)
		}
	}
}
