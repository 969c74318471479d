package llm

import "testing"

// An embeddings request's fingerprint covers every field but the user, and its route: the
// same key sent to another route is another request, never the first one's replay.
func TestEmbeddingsFingerprint(t *testing.T) {
	fp := func(a api, body string) string {
		t.Helper()
		r, err := parseRequest(a, []byte(body), nil)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r.Fingerprint(1)
	}
	base := fp(embeddingsAPI{}, `{"model":"text-embedding-3-small","input":["a","b"],"dimensions":64}`)
	if fp(embeddingsAPI{}, `{"input":["a","b"],"dimensions":64.0,"model":"text-embedding-3-small","user":"u-1"}`) != base {
		t.Error("key order, a number's form or the user changed the fingerprint")
	}
	for _, other := range []string{
		`{"model":"text-embedding-3-large","input":["a","b"],"dimensions":64}`,
		`{"model":"text-embedding-3-small","input":["b","a"],"dimensions":64}`,
		`{"model":"text-embedding-3-small","input":["a","b"],"dimensions":128}`,
		`{"model":"text-embedding-3-small","input":["a","b"],"dimensions":64,"encoding_format":"base64"}`,
	} {
		if fp(embeddingsAPI{}, other) == base {
			t.Errorf("%s has the fingerprint of another request", other)
		}
	}
	// The same fields as a chat completion (which wants messages, so it has them here).
	body := `{"model":"m","messages":[{"role":"user","content":"x"}],"input":"x"}`
	if fp(chatAPI{}, body) == fp(embeddingsAPI{}, body) {
		t.Error("a chat completion and an embeddings request share a fingerprint")
	}
	for _, bad := range []string{`{"model":"m"}`, `{"model":"m","input":""}`, `{"model":"m","input":[]}`,
		`{"model":"m","input":"x","stream":true}`, `{"model":"m","input":5}`} {
		if _, err := parseRequest(embeddingsAPI{}, []byte(bad), nil); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
