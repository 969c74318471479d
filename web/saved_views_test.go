package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/web"
)

// TestSavedViewsAreSharedByRole: a named filter saved on /ops, /reconcile or
// /reconcile/exceptions is kept in Postgres and offered to everyone of the role it is shared
// with and above, with the queue views' counts of what they match now; only its author or an
// admin deletes it, and both are audited.
func TestSavedViewsAreSharedByRole(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) { s.Recon = tw.DB })
	e.notSentUnknown(t, "old-1")
	e.notSentUnknown(t, "old-2")
	e.clock.Advance(2 * time.Hour)
	e.notSentUnknown(t, "new-1")
	author := e.signIn(t, "author@example.com", desk.RoleOncall)
	colleague := e.signIn(t, "colleague@example.com", desk.RoleOncall)
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)

	resp := e.post(t, author, "/views", url.Values{"page": {"ops"}, "name": {"Refunds unknown over 1 h"}, "role": {"oncall"},
		"query": {"tab=unknown&kind=refund&age=1h&after_id=x&refresh=0"}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || loc != "/ops?age=1h&kind=refund&tab=unknown" {
		t.Fatalf("save = %d to %q, want 303 to the view without its paging", resp.StatusCode, loc)
	}
	e.post(t, author, "/views", url.Values{"page": {"ops"}, "name": {"Everything unknown"}, "role": {"support"}, "query": {"tab=unknown"}})

	_, page := e.page(t, colleague, "/ops")
	mustContain(t, page, `data-name="Refunds unknown over 1 h"`, `href="/ops?age=1h&amp;kind=refund&amp;tab=unknown"`,
		`data-name="Everything unknown"`)
	if counts := savedCounts(page); counts["Refunds unknown over 1 h"] != "2" || counts["Everything unknown"] != "3" {
		t.Errorf("saved view counts = %v, want 2 over an hour old and 3 in all", counts)
	}
	if strings.Contains(page, `data-testid="saved-view-delete"`) {
		t.Error("a colleague may delete the author's view")
	}
	_, page = e.page(t, support, "/ops")
	if strings.Contains(page, "Refunds unknown over 1 h") || !strings.Contains(page, `data-name="Everything unknown"`) {
		t.Error("support sees a view shared with on-call, or not the one shared with support")
	}

	resp = e.post(t, manager, "/views", url.Values{"page": {"reconcile"}, "name": {"Stripe, a week by day"}, "role": {"manager"},
		"query": {"range=7d&bucket=day&provider=stripe&page=3"}})
	if resp.StatusCode != 303 {
		t.Fatalf("save on /reconcile = %d", resp.StatusCode)
	}
	_, page = e.page(t, manager, "/reconcile")
	mustContain(t, page, `data-name="Stripe, a week by day"`, `href="/reconcile?bucket=day&amp;provider=stripe&amp;range=7d"`)
	e.post(t, author, "/views", url.Values{"page": {"exceptions"}, "name": {"Open double charges"}, "role": {"oncall"},
		"query": {"status=open&kind=double_charge"}})
	_, page = e.page(t, colleague, "/reconcile/exceptions")
	mustContain(t, page, `data-name="Open double charges"`)

	if resp := e.post(t, colleague, "/views/"+savedViewID(t, e, "Refunds unknown over 1 h")+"/delete", nil); resp.StatusCode != 403 {
		t.Errorf("a colleague deleting the author's view = %d, want 403", resp.StatusCode)
	}
	if resp := e.post(t, admin, "/views/"+savedViewID(t, e, "Refunds unknown over 1 h")+"/delete", nil); resp.StatusCode != 303 {
		t.Errorf("an admin deleting a view = %d, want 303", resp.StatusCode)
	}
	if _, page = e.page(t, author, "/ops"); strings.Contains(page, "Refunds unknown over 1 h") {
		t.Error("a deleted view is still offered")
	}
	checkAudit(t, e, "saved_view.add", "manager@example.com", "Stripe, a week by day")
	checkAudit(t, e, "saved_view.delete", "admin@example.com", "Refunds unknown over 1 h")
}

// TestSavedViewsRefuseBadInput: a view that could not be opened, or shared with nobody who
// can open its page, or named twice, is refused in words and nothing is saved.
func TestSavedViewsRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) { s.Recon = tw.DB })
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "name": {"Mine"}, "role": {"oncall"}, "query": {"tab=unknown"}})
	for _, c := range []struct {
		who  string
		form url.Values
		code int
		says string
	}{
		{"oncall", url.Values{"page": {"ops"}, "name": {"MINE"}, "role": {"oncall"}, "query": {"tab=expired"}}, 409, "already exists"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"  "}, "role": {"oncall"}, "query": {"tab=unknown"}}, 422, "Name the view"},
		{"oncall", url.Values{"page": {"ops"}, "name": {strings.Repeat("n", 81)}, "role": {"oncall"}, "query": {""}}, 422, "Name the view"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"bell\x07"}, "role": {"oncall"}, "query": {""}}, 422, "Name the view"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"x"}, "role": {"root"}, "query": {""}}, 422, "Choose whom"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"x"}, "role": {"oncall"}, "query": {"tab=bogus"}}, 422, "There is no"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"x"}, "role": {"oncall"}, "query": {"tenant=nobody"}}, 422, "no tenant"},
		{"oncall", url.Values{"page": {"exceptions"}, "name": {"x"}, "role": {"support"}, "query": {""}}, 422, "cannot open this page"},
		{"oncall", url.Values{"page": {"reconcile"}, "name": {"x"}, "role": {"manager"}, "query": {""}}, 422, "pages you can open"},
		{"oncall", url.Values{"page": {"audit"}, "name": {"x"}, "role": {"oncall"}, "query": {""}}, 422, "pages you can open"},
		{"oncall", url.Values{"page": {"ops"}, "name": {"x"}, "role": {"oncall"}, "query": {"%zz"}}, 422, "could not be read"},
		{"support", url.Values{"page": {"exceptions"}, "name": {"x"}, "role": {"oncall"}, "query": {""}}, 422, "pages you can open"},
	} {
		client := oncall
		if c.who == "support" {
			client = support
		}
		resp, err := client.PostForm(e.url+"/views", c.form)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%v = %d, want %d saying %q", c.form, resp.StatusCode, c.code, c.says)
		}
	}
	var n int
	if err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM saved_views`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d saved views after the refusals (%v), want the first one only", n, err)
	}
	for _, bad := range []string{"/views/0/delete", "/views/x/delete", "/views/9999/delete"} {
		if resp := e.post(t, oncall, bad, nil); resp.StatusCode != 404 {
			t.Errorf("%s = %d, want 404", bad, resp.StatusCode)
		}
	}
}

// savedCounts reads each saved view's count from a queue page.
func savedCounts(page string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(page, `data-testid="saved-view" data-name="`)[1:] {
		name := part[:strings.Index(part, `"`)]
		if i := strings.Index(part, `data-testid="saved-view-count">`); i >= 0 && i < strings.Index(part, "</a>") {
			rest := part[i+len(`data-testid="saved-view-count">`):]
			out[name] = rest[:strings.Index(rest, "<")]
		}
	}
	return out
}

func savedViewID(t *testing.T, e *dashEnv, name string) string {
	t.Helper()
	var id int64
	if err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT id FROM saved_views WHERE name = $1`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(id)
}

// checkAudit: one audit row of action by actor mentions want.
func checkAudit(t *testing.T, e *dashEnv, action, actor, want string) {
	t.Helper()
	var n int
	err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1 AND actor = $2
	AND after::text LIKE '%' || $3 || '%'`, action, actor, want).Scan(&n)
	if err != nil || n != 1 {
		t.Errorf("%d audit rows %s by %s mentioning %q (%v), want 1", n, action, actor, want, err)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
