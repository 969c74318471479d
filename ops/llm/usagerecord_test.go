package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestAUsageRecordIsEncodedAsMarshalEncodesIt: the usage an operation stores, from which
// its charge and cost are read (ops rule 3), is encoded by hand byte for byte as
// json.Marshal encodes it, for every field set or left empty and for strings json.Marshal
// escapes, and a usual record takes one allocation, where json.Marshal took several.
func TestAUsageRecordIsEncodedAsMarshalEncodesIt(t *testing.T) {
	full := usageRecord{Usage: Usage{PromptTokens: 19, CompletionTokens: 10, CachedTokens: 3, CacheWriteTokens: 4,
		CacheWrite1hTokens: 2, TotalTokens: 29}, Model: "gpt-4o-mini-2024-07-18", CostMicros: 1234, CostKnown: true,
		Currency: "usd", ProviderRequestID: "req_abc123", Attempt: 2, PossibleDuplicates: 1}
	// A field added to the record and left out of encode must fail here, not go unstored.
	if f, ok := zeroField(reflect.ValueOf(full), ""); ok {
		t.Fatalf("the full record leaves %s empty: set it here, and write it in encode", f)
	}
	for _, r := range []usageRecord{
		{},
		full,
		{Usage: Usage{PromptTokens: -1, TotalTokens: 1 << 40}, Model: "m", CostMicros: -5, Attempt: 1},
		{Model: `a "quoted" model`, ProviderRequestID: `back\slash`},
		{Model: "<b>&</b>", Currency: "\x00\x1f", ProviderRequestID: "caf\u00e9 \u2028"},
		{Model: "\xff invalid", Currency: "\x7f"},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.encode(); string(got) != string(want) {
			t.Errorf("encoded as\n%s\njson.Marshal encodes\n%s", got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { full.encode() }); n > 1 {
		t.Errorf("encoding a usage record took %.0f allocations, want 1", n)
	}
}

// zeroField names the first field of v, embedded structs' fields included, left at its
// zero value.
func zeroField(v reflect.Value, prefix string) (string, bool) {
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous && f.Kind() == reflect.Struct {
			if name, ok := zeroField(f, prefix+sf.Name+"."); ok {
				return name, true
			}
			continue
		}
		if f.IsZero() {
			return prefix + sf.Name, true
		}
	}
	return "", false
}
