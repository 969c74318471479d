package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg/reconstore"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/web"
)

// hostileFormValues are what a careless or hostile person types or pastes into a form field or
// an address: nothing, a huge paste, bytes that are not text, numbers out of range, markup
// and quoting.
var hostileFormValues = []string{"", strings.Repeat("x", 70000), "a\x00b", "\xff\xfe", "-1", "99999999999999999999",
	"' OR 1=1 --", "<script>alert(1)</script>", "%zz", "00000000-0000-0000-0000-000000000000"}

// hostileFormFields are the names of every field the dashboard's forms read.
var hostileFormFields = []string{"to", "note", "provider_ref", "version", "ids", "q", "tab", "status", "kind", "tenant",
	"email", "password", "role", "name", "query", "page", "scope", "label", "assignee", "action", "back", "next",
	"reason", "op", "provider", "age", "awaiting", "from", "severity", "state", "resolution", "proposal_id", "budget"}

// withEveryForm wires a dashboard with every page that has a form: follow-ups, approvals
// for closes as not executed, reconciliation, insights and alerts.
var withEveryForm = []func(*web.Server, *testworld.World){withFollowUps, withApprovals(ops.ApprovalPolicy{NotExecuted: true}),
	func(s *web.Server, tw *testworld.World) {
		as := alertstore.New(tw.DB)
		s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), as
		ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: s.Clock}
		s.AlertsDeps = web.AlertsDeps{AlertRules: ev.Rules, Alerts: as, AlertTest: ev}
	}}

// formRoutes are the routes of the dashboard's forms: every POST route but the APIs', the
// gateway's, MCP's, the webhooks' and those starting with one of skip.
func formRoutes(t *testing.T, e *dashEnv, skip ...string) []string {
	t.Helper()
	var routes []string
	err := chi.Walk(e.server.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method != http.MethodPost {
			return nil
		}
		for _, api := range append([]string{"/api/", "/v1/", "/mcp", "/webhooks/"}, skip...) {
			if strings.HasPrefix(route, api) {
				return nil
			}
		}
		routes = append(routes, route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return routes
}

// TestHostileFormsNeverFail posts hostile values, as an admin who may use every form, to
// every form route of the dashboard, with hostile ids in the address and with the id of a
// real unknown refund: no answer is a server error, each refusal is a readable page, and
// the refund is neither closed nor changed.
func TestHostileFormsNeverFail(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withEveryForm...)
	op := e.notSentUnknown(t, "hostile-1")
	c := e.signIn(t, "admin@example.com", desk.RoleAdmin)

	routes := formRoutes(t, e, "/login", "/logout")
	if len(routes) < 15 {
		t.Fatalf("found %d form routes, want the dashboard's every form: %v", len(routes), routes)
	}

	ids := []string{op.ID, "not-an-id", "-1", "99999999999999999999", "%00", "00000000-0000-0000-0000-000000000000"}
	forms := hostileForms()
	for _, route := range routes {
		paths := []string{route}
		if strings.Contains(route, "{id}") {
			paths = paths[:0]
			for _, id := range ids {
				paths = append(paths, strings.ReplaceAll(route, "{id}", id))
			}
		}
		for _, path := range paths {
			for _, form := range forms {
				hostilePost(t, e, c, path, form)
			}
		}
	}

	got := e.get(t, op.ID)
	if got.Status != op.Status || got.Version != op.Version || got.ClosedAt != nil {
		t.Errorf("hostile forms changed the refund: %s v%d closed %v, was %s v%d", got.Status, got.Version, got.ClosedAt, op.Status, op.Version)
	}
	if n := e.count(t, `SELECT count(*) FROM close_proposals`); n != 0 {
		t.Errorf("hostile forms proposed %d closes", n)
	}
}

// hostileForm is a form with every field of hostileFormFields set to one hostile value,
// encoded as PostForm would send it.
type hostileForm struct {
	value, body string
}

// hostileForms encodes the form of each hostile value once: the sweep posts each of them to
// every path, and under -race encoding 32 pastes of 70 kB again for each post took more
// than half of the test's time.
func hostileForms() []hostileForm {
	forms := make([]hostileForm, 0, len(hostileFormValues))
	for _, v := range hostileFormValues {
		form := url.Values{}
		for _, f := range hostileFormFields {
			form.Set(f, v)
		}
		forms = append(forms, hostileForm{value: v, body: form.Encode()})
	}
	return forms
}

// hostilePost posts form to path and fails the test on a server error or a refusal that is
// not a page a person can read.
func hostilePost(t *testing.T, e *dashEnv, c *http.Client, path string, form hostileForm) {
	t.Helper()
	resp, err := c.Post(e.url+path, "application/x-www-form-urlencoded", strings.NewReader(form.body))
	if err != nil {
		t.Fatalf("POST %.60q: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	what := "POST " + path + " with every field " + shortValue(form.value)
	switch {
	case resp.StatusCode >= 500:
		t.Errorf("%s = %d: %.300s", what, resp.StatusCode, body)
	case resp.StatusCode >= 400 && !strings.Contains(resp.Header.Get("Content-Type"), "text/html"):
		t.Errorf("%s = %d as %q, want a page", what, resp.StatusCode, resp.Header.Get("Content-Type"))
	case resp.StatusCode >= 400 && !strings.Contains(string(body), "</html>"):
		t.Errorf("%s = %d without a whole page: %.300s", what, resp.StatusCode, body)
	}
}

// shortValue names a hostile value in a failure's message.
func shortValue(v string) string {
	if len(v) > 40 {
		return "a paste of " + itoa(int64(len(v))) + " bytes"
	}
	return strconv.Quote(v)
}
