package llm

import (
	"encoding/json"
	"strconv"
)

// encode is r as json.Marshal encodes it, byte for byte, appended by hand: every answer's
// usage is encoded once to be stored, and reflection was most of what that cost. A string
// that json.Marshal might escape (a quote, a backslash, a control character, <, > or &, or
// anything beyond printable ASCII) sends the whole record to json.Marshal.
func (r usageRecord) encode() []byte {
	if !plainJSON(r.Model) || !plainJSON(r.Currency) || !plainJSON(r.ProviderRequestID) {
		b, _ := json.Marshal(r)
		return b
	}
	b := make([]byte, 0, 320+len(r.Model)+len(r.Currency)+len(r.ProviderRequestID))
	b = appendIntField(b, `{"prompt_tokens":`, int64(r.PromptTokens))
	b = appendIntField(b, `,"completion_tokens":`, int64(r.CompletionTokens))
	b = appendIntField(b, `,"cached_tokens":`, int64(r.CachedTokens))
	if r.CacheWriteTokens != 0 {
		b = appendIntField(b, `,"cache_write_tokens":`, int64(r.CacheWriteTokens))
	}
	if r.CacheWrite1hTokens != 0 {
		b = appendIntField(b, `,"cache_write_1h_tokens":`, int64(r.CacheWrite1hTokens))
	}
	b = appendIntField(b, `,"total_tokens":`, int64(r.TotalTokens))
	b = append(append(append(b, `,"model":"`...), r.Model...), '"')
	b = appendIntField(b, `,"cost_micros":`, r.CostMicros)
	b = strconv.AppendBool(append(b, `,"cost_known":`...), r.CostKnown)
	if r.Currency != "" {
		b = append(append(append(b, `,"currency":"`...), r.Currency...), '"')
	}
	if r.ProviderRequestID != "" {
		b = append(append(append(b, `,"provider_request_id":"`...), r.ProviderRequestID...), '"')
	}
	b = appendIntField(b, `,"attempt":`, int64(r.Attempt))
	b = appendIntField(b, `,"possible_duplicates":`, int64(r.PossibleDuplicates))
	return append(b, '}')
}

func appendIntField(b []byte, name string, n int64) []byte {
	return strconv.AppendInt(append(b, name...), n, 10)
}

// plainJSON reports whether s is printable ASCII without a quote, a backslash, or the <, >
// and & json.Marshal escapes for HTML: json.Marshal writes such a string as it is.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
