package openai

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/settle-dev/settle/ops/llm"
)

// Tagging a body without reading its fields.
//
// Most bodies name neither metadata nor store: the gateway's clients seldom send them. Such
// a body holds no key of Settle's to drop (untagged) and no store: false to honour (tagBody),
// so its fields need not be decoded and encoded again, which was most of what the adapter
// did per send: it is sent as it came, or with Settle's tags added after its last field.
// Only a body in which no key can spell either word qualifies: neither appears in it in any
// case, and it holds no \u escape, through which a key could spell one. Any other body
// takes the path that reads its fields, as before.

// namesNoMetadata reports whether no key of body can be metadata: neither the word, in any
// case, nor a \u escape that could spell it appears in it.
func namesNoMetadata(body []byte) bool {
	return !bytes.Contains(body, []byte(`\u`)) && !containsFold(body, "metadata")
}

// appendTags returns body, a JSON object that names neither metadata nor store
// (namesNoMetadata, and no "store" in any case), with store: true and Settle's metadata
// added after its last field, as tagBody would add them; ok is false when body is not a
// JSON object, or names store, or opID is "".
func appendTags(body []byte, opID string, tenantID int64) (_ []byte, ok bool) {
	if opID == "" || containsFold(body, "store") || !json.Valid(body) {
		return nil, false
	}
	inner := bytes.TrimSpace(body)
	if len(inner) < 2 || inner[0] != '{' {
		return nil, false
	}
	inner = bytes.TrimSpace(inner[1 : len(inner)-1])
	if !plainID(opID) {
		return nil, false
	}
	out := make([]byte, 0, len(inner)+len(opID)+96)
	out = append(append(out, '{'), inner...)
	if len(inner) > 0 {
		out = append(out, ',')
	}
	// The metadata as json.Marshal writes the map tagBody builds: its keys sorted, the id
	// needing no escape.
	out = append(out, `"metadata":{"`+llm.MetaOperation+`":"`...)
	out = append(append(out, opID...), `","`+llm.MetaTenant+`":"`...)
	out = strconv.AppendInt(out, tenantID, 10)
	return append(out, `"},"store":true}`...), true
}

// plainID reports whether id is written in JSON as it is, between quotes: the operation ids
// Settle makes are.
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// containsFold reports whether s holds word (lower-case ASCII) in any case.
func containsFold(s []byte, word string) bool {
	first := word[0]
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i]|0x20 != first {
			continue
		}
		j := 1
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}
