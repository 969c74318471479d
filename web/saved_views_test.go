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
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/web"
)

// TestSavedViewsAreSharedByRole: a named filter saved on /ops, /reconcile or
// /reconcile/exceptions is kept in Postgres and offered to everyone of the role it is shared
// with and above, with the queue views' counts of what they match now; only its author or an
// admin deletes it, and both are audited.
func TestSavedViewsAreSharedByRole(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	})
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
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	})
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

// savedViewQuery is the stored filter of the view named name.
func savedViewQuery(t *testing.T, e *dashEnv, name string) string {
	t.Helper()
	var q string
	if err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT query FROM saved_views WHERE name = $1`, name).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}

// insertView stores a view as it could have been saved before views were bounded, or by
// many people, without going through the save form.
func insertView(t *testing.T, e *dashEnv, page, name, query, role, by string) {
	t.Helper()
	if _, err := e.world.DB.Pool.Exec(context.Background(), `INSERT INTO saved_views (page, name, query, role, created_by, created_at)
VALUES ($1, $2, $3, $4, $5, now())`, page, name, query, role, by); err != nil {
		t.Fatal(err)
	}
}

// TestSavedViewsKeepOnlyThePagesFilters: a saved view keeps the filter keys its page reads
// and nothing else, whatever the saved address carried; a view kept from before, with
// unknown keys or a filter too long to open, cannot make a page that offers it large.
func TestSavedViewsKeepOnlyThePagesFilters(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	})
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	junk := strings.Repeat("j", 3000)

	for _, c := range []struct {
		who        *http.Client
		page, name string
		query      string
		want       string
	}{
		{oncall, "ops", "Unknown refunds", "tab=unknown&kind=refund&utm_source=mail&junk=" + junk + "&refresh=5&after_id=x", "kind=refund&tab=unknown"},
		{manager, "reconcile", "A week", "range=7d&bucket=day&junk=" + junk + "&page=2", "bucket=day&range=7d"},
		{oncall, "exceptions", "Double charges", "status=open&kind=double_charge&junk=" + junk + "&before=9", "kind=double_charge&status=open"},
	} {
		resp := e.post(t, c.who, "/views", url.Values{"page": {c.page}, "name": {c.name}, "role": {string(desk.SavedViewPages[c.page])}, "query": {c.query}})
		if resp.StatusCode != 303 || !strings.HasSuffix(resp.Header.Get("Location"), "?"+c.want) {
			t.Errorf("save on %s = %d to %.100q, want 303 to the view with its filter keys only", c.page, resp.StatusCode, resp.Header.Get("Location"))
		}
		if got := savedViewQuery(t, e, c.name); got != c.want {
			t.Errorf("saved %s filter = %.100q, want %q", c.page, got, c.want)
		}
	}

	if _, err := e.world.DB.Pool.Exec(context.Background(), `INSERT INTO saved_views (page, name, query, role, created_by, created_at)
VALUES ('ops', 'long', $1, 'support', 'x@example.com', now())`, "tab=expired&q="+junk); err == nil {
		t.Error("the table took a filter over the bound")
	}
	// As in a database that kept views from before they were bounded.
	if _, err := e.world.DB.Pool.Exec(context.Background(), `ALTER TABLE saved_views DROP CONSTRAINT saved_views_query_length`); err != nil {
		t.Fatal(err)
	}
	insertView(t, e, "ops", "Old with a key", "tab=expired&utm_source=mail", "support", "old@example.com")
	insertView(t, e, "ops", "Old with junk", "tab=expired&junk="+strings.Repeat("j", 2<<20), "support", "old@example.com")
	insertView(t, e, "ops", "Old and long", "tab=expired&age="+strings.Repeat("0", 5000)+"1h", "support", "old@example.com")
	_, page := e.page(t, oncall, "/ops")
	if len(page) > 100<<10 {
		t.Fatalf("/ops with views saved before the bounds is %d bytes", len(page))
	}
	mustContain(t, page, `data-name="Old with a key"`, `href="/ops?tab=expired"`, `data-testid="saved-view-broken"`,
		`data-name="Old with junk"`, `data-name="Old and long"`, "too long to open")
	if strings.Contains(page, "utm_source") || strings.Contains(page, "jjjj") || strings.Contains(page, "0000000000") {
		t.Error("the page repeats a saved view's unknown keys or over-long filter")
	}
}

// TestSavedViewsAreBounded: a view's filter is at most 1 KB, a person keeps at most 10 views
// on a page, and the save form's body is at most a few kilobytes; each refusal is a page that
// says why, and nothing is saved.
func TestSavedViewsAreBounded(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	for _, c := range []struct {
		form url.Values
		code int
		says string
	}{
		{url.Values{"page": {"ops"}, "name": {"padded"}, "role": {"oncall"}, "query": {"q=x" + strings.Repeat("+", 2000)}}, 422, "too long"},
		{url.Values{"page": {"ops"}, "name": {"zeros"}, "role": {"oncall"}, "query": {"age=" + strings.Repeat("0", 2000) + "1h"}}, 422, "too long"},
		{url.Values{"page": {"ops"}, "name": {"body"}, "role": {"oncall"}, "query": {"tab=unknown"}, "pad": {strings.Repeat("p", 100<<10)}}, 413, "too large"},
	} {
		resp, err := oncall.PostForm(e.url+"/views", c.form)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != c.code || !strings.Contains(body, c.says) || !strings.Contains(body, "</html>") {
			t.Errorf("save %q = %d, want a page %d saying %q: %.200s", c.form.Get("name"), resp.StatusCode, c.code, c.says, body)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM saved_views`); n != 0 {
		t.Fatalf("%d views saved by refused forms", n)
	}

	for i := range desk.MaxSavedViewsPerUser {
		if resp := e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "name": {fmt.Sprintf("mine %02d", i)}, "role": {"oncall"},
			"query": {"tab=unknown"}}); resp.StatusCode != 303 {
			t.Fatalf("view %d of the allowed %d = %d", i+1, desk.MaxSavedViewsPerUser, resp.StatusCode)
		}
	}
	resp, err := oncall.PostForm(e.url+"/views", url.Values{"page": {"ops"}, "name": {"one too many"}, "role": {"oncall"}, "query": {"tab=expired"}})
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != 422 || !strings.Contains(body, "delete one") {
		t.Errorf("view %d = %d, want 422 asking to delete one first: %.200s", desk.MaxSavedViewsPerUser+1, resp.StatusCode, body)
	}
	if n := e.count(t, `SELECT count(*) FROM saved_views`); n != desk.MaxSavedViewsPerUser {
		t.Fatalf("%d views kept, want %d", n, desk.MaxSavedViewsPerUser)
	}
	if resp := e.post(t, oncall, "/views", url.Values{"page": {"exceptions"}, "name": {"another page"}, "role": {"oncall"},
		"query": {"status=open"}}); resp.StatusCode != 303 {
		t.Errorf("a view on another page = %d, want 303: the limit is per page", resp.StatusCode)
	}
	e.post(t, oncall, "/views/"+savedViewID(t, e, "mine 00")+"/delete", nil)
	if resp := e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "name": {"one too many"}, "role": {"oncall"},
		"query": {"tab=expired"}}); resp.StatusCode != 303 {
		t.Errorf("a view after deleting one = %d, want 303", resp.StatusCode)
	}
}

// TestSavedViewsBarGivesTheTeamItsShare: the bar offers at most 20 views. A person's own
// views take at most half of it, and the views others shared are taken in turn from each
// author, so neither someone's many views nor their names' order push the team's views out
// of anyone's bar; what is left out is counted.
func TestSavedViewsBarGivesTheTeamItsShare(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	viewer := e.signIn(t, "viewer@example.com", desk.RoleSupport)
	other := e.signIn(t, "other@example.com", desk.RoleSupport)
	for i := range 10 {
		insertView(t, e, "ops", fmt.Sprintf("m viewer %02d", i), "tab=unknown", "support", "viewer@example.com")
		for _, a := range []string{"a1", "a2", "a3"} {
			insertView(t, e, "ops", fmt.Sprintf("a %s %02d", a, i), "tab=expired", "support", a+"@example.com")
		}
	}
	insertView(t, e, "ops", "z team", "tab=in_progress", "support", "team@example.com")

	for who, c := range map[string]*http.Client{"viewer": viewer, "other": other} {
		_, page := e.page(t, c, "/ops")
		names := savedCounts(page)
		if len(names) != desk.MaxSavedViewsPerPage {
			t.Errorf("%s's bar offers %d views, want %d", who, len(names), desk.MaxSavedViewsPerPage)
		}
		if _, ok := names["z team"]; !ok {
			t.Errorf("%s's bar lost the team's view to others' many views: %v", who, names)
		}
		mine := 0
		for n := range names {
			if strings.HasPrefix(n, "m viewer") {
				mine++
			}
		}
		want := 10
		if who == "other" {
			want = 4 // one author among five, in turn
		}
		if mine != want {
			t.Errorf("%s's bar offers %d of viewer's views, want %d", who, mine, want)
		}
		mustContain(t, page, `data-testid="saved-views-more"`, "21 more views not shown")
	}
}
