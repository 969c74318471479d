package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// A saved view is offered to everyone of a role by its name alone, so its name must show as
// itself: with an invisible character or a bidi override, a view could pass for the team's
// "Unknown refunds" (even past the check that no two views share a name) while filtering
// another queue, and on-call would open it and see nothing to do.
func TestSavedViewNamesShowAsThemselves(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "name": {"Unknown refunds"}, "role": {"support"}, "query": {"tab=unknown&kind=refund"}})
	for _, name := range []string{
		"Unknown\u200b refunds",       // a zero-width space
		"Unknown refunds\u2060",       // a word joiner
		"\u202eUnknown refunds",       // a right-to-left override
		"Unknown\u00a0refunds",        // a no-break space, which looks like a space
		"Unknown refunds\ufeff",       // a byte order mark
		"\u2066Unknown refunds\u2069", // an isolate
	} {
		resp, err := support.PostForm(e.url+"/views", url.Values{"page": {"ops"}, "name": {name}, "role": {"support"},
			"query": {"tab=unknown&kind=llm_call"}})
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); resp.StatusCode != 422 || !strings.Contains(body, "Name the view") {
			t.Errorf("a view named %+q: %d, want 422 asking for a plain name", name, resp.StatusCode)
		}
	}
	var n int
	if err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM saved_views`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d saved views (%v), want the team's one only", n, err)
	}
	// Names in other scripts, with accents and punctuation, are still names.
	for _, name := range []string{"Rückerstattungen – offen", "未確認の返金", "Refunds (EU) #2"} {
		resp := e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "name": {name}, "role": {"oncall"}, "query": {"tab=unknown"}})
		if resp.StatusCode != 303 {
			t.Errorf("a view named %q: %d, want it saved", name, resp.StatusCode)
		}
	}
}
