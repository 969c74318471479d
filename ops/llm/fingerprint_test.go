package llm

import (
	"testing"
)

// TestFingerprintsStayTheSame: a fingerprint is stored with every open operation and
// compared with each retry's, so one computed differently after an upgrade would refuse a
// client's honest retry as another request. These were computed before the body was read in
// one pass; a change of how requests are read must leave them as they are.
func TestFingerprintsStayTheSame(t *testing.T) {
	for _, c := range []struct {
		api  api
		body string
		h    map[string]string
		want string
	}{
		{chatAPI{}, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi <b> & \u00e9"}],"temperature":0.70,"max_tokens":1e2,"stream":true,"user":"u-1","seed":null}`, nil,
			"9d249348a133fb80844e8bcf3f6b5ad18d4907b41a112d6ab91c910cc729c696"},
		// A key given twice counts with its last value, at the top and inside.
		{chatAPI{}, `{"model":"a","model":"gpt-4o","messages":[{"role":"user","content":"x","content":"y"}],"top_p":1.0,"logit_bias":{"50256":-100},"n":2,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]}`, nil,
			"592761c33fbedd7d4f39bc9136919776e536f735248657ba23d6c5b4389e679e"},
		{embeddingsAPI{}, `{"model":"text-embedding-3-small","input":["a","b"],"dimensions":256,"encoding_format":"float","user":"u"}`, nil,
			"5667df18308e5c0c852c167dcc5301232b72ac031d27a5b8b31dd32ef29eae20"},
		{responsesAPI{}, `{"model":"gpt-4.1","input":"hi","temperature":0.2,"max_output_tokens":16,"stream":true,"metadata":{"a":"b"},"store":false}`, nil,
			"bc48f89fc0b2a715779ebce6ecdde0bf47e8fec09d2b205fff176b8d18651d42"},
		{messagesAPI{}, `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":"x"}],"stream":true}`, map[string]string{"anthropic-beta": "b,a"},
			"2def71eb39cf8530a5163742ea3e438cb98b445304a8f1c1f41a8c16235e8db4"},
	} {
		r, err := parseRequest(c.api, []byte(c.body), headers(c.h))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if got := r.Fingerprint(7); got != c.want {
			t.Errorf("%s: fingerprint %s, want %s as before", c.body, got, c.want)
		}
	}
}

// TestParseRequestDecodesTheBodyOnce: reading a chat completion and taking its fingerprint,
// which the gateway does for every call, decodes the body for the fingerprint in one pass:
// a decoder per field allocated a buffer each, some 11.7 kB per short request.
func TestParseRequestDecodesTheBodyOnce(t *testing.T) {
	req := []byte(`{"model":"fake-small","messages":[{"role":"user","content":"summarise the ticket"}],"temperature":0.2,"max_tokens":16,"stream":true}`)
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := parseRequest(chatAPI{}, req, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = r.Fingerprint(1)
		}
	})
	if got := res.AllocedBytesPerOp(); got > 6<<10 {
		t.Errorf("reading and fingerprinting a short chat completion allocated %d bytes, want at most %d", got, 6<<10)
	}
}
