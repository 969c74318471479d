package ops_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestJSONNamesAreExactAtEveryDepth checks the shared check behind the API's and the MCP
// tools' strict reading (ops rule 12): a key in another case than a field's name, or given
// twice, is found wherever a Go field would be filled from it; exact bodies pass.
func TestJSONNamesAreExactAtEveryDepth(t *testing.T) {
	type inner struct {
		Text string `json:"text"`
	}
	type Embedded struct {
		Kind string `json:"kind"`
	}
	type body struct {
		Embedded
		Amount *int64            `json:"amount_cents,omitempty"`
		Doc    inner             `json:"document"`
		Items  []inner           `json:"items"`
		Meta   map[string]inner  `json:"meta"`
		Raw    json.RawMessage   `json:"raw"`
		Skip   string            `json:"-"`
		Labels map[string]string `json:"labels"`
	}
	for _, c := range []struct {
		json, path, field string
		repeated          bool
	}{
		{`{"amount_cents":1,"kind":"a","document":{"text":"x"},"items":[{"text":"y"}],"meta":{"k":{"text":"z"}},"raw":{"a":1},"labels":{"A":"1","a":"2"}}`, "", "", false},
		{`{"AMOUNT_CENTS":1}`, "AMOUNT_CENTS", "amount_cents", false},
		{`{"amount_centſ":1}`, "amount_centſ", "amount_cents", false},
		{`{"Kind":"a"}`, "Kind", "kind", false},
		{`{"document":{"Text":"x"}}`, "document.Text", "document.text", false},
		{`{"items":[{"text":"y"},{"TEXT":"y"}]}`, "items.TEXT", "items.text", false},
		{`{"meta":{"k":{"tExt":"z"}}}`, "meta.k.tExt", "meta.k.text", false},
		{`{"amount_cents":1,"amount_cents":2}`, "amount_cents", "amount_cents", true},
		{`{"raw":{"a":1,"a":2}}`, "raw.a", "raw.a", true},
		{`{"labels":{"a":"1","a":"2"}}`, "labels.a", "labels.a", true},
		{`{"amount_cents":1,`, "", "", false},
		{strings.Repeat(`[`, 20000), "", "", false},
	} {
		p := ops.FindJSONNameProblem([]byte(c.json), &body{})
		switch {
		case c.path == "" && p != nil:
			t.Errorf("%.60s: found %+v in a body with exact names", c.json, *p)
		case c.path != "" && (p == nil || p.Path != c.path || p.Field != c.field || p.Repeated != c.repeated):
			t.Errorf("%.60s: got %+v, want %s (%s, repeated %v)", c.json, p, c.path, c.field, c.repeated)
		}
	}
}
