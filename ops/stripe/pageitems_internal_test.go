package stripe

import (
	"strings"
	"testing"
)

// A list body is split into its items as written, whatever their strings hold.
func TestDataItemsSplitsAListBodyAsWritten(t *testing.T) {
	a := `{"id":"re_a","metadata":{"note":"a } and a { and \"quoted ]\" and \\"}}`
	b := `{"id":"re_b","nested":{"list":[{"x":1},[2,3]]},"s":"data"}`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"two items", `{"object":"list","data":[` + a + `,` + b + `],"has_more":false,"url":"/v1/refunds"}`, []string{a, b}},
		{"data after other arrays", `{"object":"data","other":[{"id":"no"}],"data":[ ` + b + ` ],"has_more":true}`, []string{b}},
		{"spaces around", "{ \"data\" :\n[\n" + a + "\n] }", []string{a}},
		{"empty", `{"object":"list","data":[],"has_more":false}`, nil},
		{"no data", `{"object":"list","items":[` + a + `]}`, nil},
		{"cut short", `{"object":"list","data":[` + a[:20], nil},
		{"not json", `data data`, nil},
	} {
		got := dataItems([]byte(tc.body))
		var gs []string
		for _, it := range got {
			gs = append(gs, string(it))
		}
		if strings.Join(gs, "|") != strings.Join(tc.want, "|") || len(gs) != len(tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, gs, tc.want)
		}
	}
}
