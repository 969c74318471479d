package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/ops/desk"
)

// hostileNexts are redirect targets a request may carry (the sign-in's next, a form's
// back) that must all lead to the dashboard's home: other sites written the ways browsers
// still read as another site (a backslash is a slash to them, tabs and newlines are
// dropped), encoded slashes and backslashes, dot segments that climb out of a path or
// hide a backslash until cleaning, and paths that are no page of the dashboard.
var hostileNexts = []string{
	"//evil.example", "///evil.example", "//ops", "///ops", "//evil.example/ops", `/\evil.example`, `/./\evil.example`, `/.\evil.example`,
	`\\evil.example`, `\/evil.example`, "/%2F%2Fevil.example", "/%2f/evil.example", "/%5Cevil.example", "/%5c/evil.example",
	"/%5C%5Cevil.example", "https://evil.example", "HTTPS://evil.example/ops", "https:evil.example", "javascript:alert(1)",
	"/\t/evil.example", "\t//evil.example", "/\n/evil.example", "/\r\n/evil.example", "/%09/evil.example", "/%0a/evil.example",
	" //evil.example", "/ops/../\\evil.example", "/ops/..//evil.example", "/ops/../../evil.example", "/../evil.example",
	"/ops/%2e%2e/%2e%2e//evil.example", "/..%2F..%2F/evil.example", "/ops/./../ops", "/nowhere", "ops", "/login/oidc/callback?code=x",
}

// onSite reports whether a browser sent to loc stays on base's site, reading loc the way
// browsers do: leading spaces and control characters dropped, tabs and newlines removed
// anywhere, a backslash taken for a slash.
func onSite(base *url.URL, loc string) bool {
	s := strings.TrimLeft(loc, " \x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f")
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, s)
	u, err := base.Parse(s)
	return err == nil && u.Scheme == base.Scheme && u.Host == base.Host
}

// TestRedirectsStayOnSite: every endpoint that redirects to a target named in the request
// (GET /login when signed in, POST /login, the single sign-on started at /login/oidc and
// finished at its callback, and the follow button's back) sends the browser to /ops for each
// hostile target, and to the page asked for when it is one of the dashboard's, as the
// Location header the server actually sends says.
func TestRedirectsStayOnSite(t *testing.T) {
	t.Parallel()
	e := newSSOEnvWith(t, false, nil, withFollowUps)
	e.idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"settle-oncall"}})
	op := e.notSentUnknown(t, "7001")
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	base, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/ops?tab=expired": "/ops?tab=expired", "/support?q=7001": "/support?q=7001", "/ops/" + op.ID: "/ops/" + op.ID}
	for _, next := range hostileNexts {
		want[next] = "/ops"
	}
	for next, to := range want {
		check := func(via string, resp *http.Response) {
			t.Helper()
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || loc != to || !onSite(base, loc) {
				t.Errorf("%s with %q: %d to %q, want 303 to %q", via, next, resp.StatusCode, loc, to)
			}
		}
		resp, err := support.Get(e.url + "/login?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		check("GET /login signed in", resp)

		resp, err = client(t).PostForm(e.url+"/login", url.Values{"email": {"support@example.com"}, "password": {password}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		check("POST /login", resp)

		resp, _ = e.signInOverHTTP(t, client(t), next, "olga")
		check("GET /login/oidc and its callback", resp)

		resp, err = support.PostForm(e.url+"/ops/"+op.ID+"/follow", url.Values{"back": {next}})
		if err != nil {
			t.Fatal(err)
		}
		check("POST /ops/{id}/follow", resp)
	}
}
