package ops

import "testing"

// TestStorableJSONReplacesOnlyWhatPostgresRefuses: a NUL or a surrogate escaped without its
// other half becomes \ufffd; a whole pair, an escaped backslash before "u0000" and every
// other escape stay as they were, so an answer Postgres takes is stored byte for byte.
func TestStorableJSONReplacesOnlyWhatPostgresRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"x\u0000y"}`:          `{"a":"x\ufffdy"}`,
		`{"a":"\ud83d"}`:            `{"a":"\ufffd"}`,
		`{"a":"\ud83d\u0041"}`:      `{"a":"\ufffd\u0041"}`,
		`{"a":"\ude00\ud83d"}`:      `{"a":"\ufffd\ufffd"}`,
		`{"a":"\ud83d\ude00"}`:      `{"a":"\ud83d\ude00"}`,
		`{"a":"\\u0000 \\ud83d"}`:   `{"a":"\\u0000 \\ud83d"}`,
		`{"a":"\\\u0000"}`:          `{"a":"\\\ufffd"}`,
		`{"a":"\n\"\u00e9\uD83D"}`:  `{"a":"\n\"\u00e9\ufffd"}`,
		`{"a":"plain","b":[1,2,3]}`: `{"a":"plain","b":[1,2,3]}`,
	} {
		if got := string(StorableJSON([]byte(in))); got != want {
			t.Errorf("StorableJSON(%s) = %s, want %s", in, got, want)
		}
		if err := CheckJSONText("f", []byte(in)); (err == nil) != (in == want) {
			t.Errorf("CheckJSONText(%s) = %v; refused must be exactly what StorableJSON changes", in, err)
		}
	}
}
