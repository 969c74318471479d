package fake

import (
	"encoding/json"
	"testing"
	"time"
)

// A hand-encoded chunk must be byte for byte what encoding the chunk's map gives, so the
// clients and the gateway read the same stream as before (the keys in sorted order, strings
// escaped as encoding/json escapes them, HTML characters included).
func TestAChunkIsEncodedAsAMapWouldBe(t *testing.T) {
	g := Generation{ID: "chatcmpl-<x&y>", Model: "gpt-4o-mini", Created: time.Unix(1764806400, 0)}
	usage := obj{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
	for _, tok := range []string{"hello", ` "quoted"`, "<b>&amp;</b>", "line\nbreak\ttab", "ünï\u2028code", ""} {
		for _, includeUsage := range []bool{false, true} {
			for _, u := range []any{nil, usage} {
				c := obj{"id": g.ID, "object": "chat.completion.chunk", "created": g.Created.Unix(), "model": g.Model,
					"system_fingerprint": "fp_settle_fake",
					"choices":            []obj{{"index": 2, "delta": obj{"content": tok}, "logprobs": nil, "finish_reason": nil}}}
				if includeUsage {
					c["usage"] = u
				}
				want, _ := json.Marshal(c)
				got := appendChunk(nil, appendTokenChoice(nil, 2, tok), chunkTail(g), includeUsage, u)
				if w := "data: " + string(want) + "\n\n"; string(got) != w {
					t.Errorf("token %q, usage %v %v:\n got %s\nwant %s", tok, includeUsage, u, got, w)
				}
			}
		}
	}
}
