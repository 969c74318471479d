package oidctest

import (
	"net/http"
	"net/url"
	"testing"
)

// SignIn walks a browser through the provider without a browser: from start, Settle's
// answer to GET /login/oidc, it follows the provider's redirects and signs in at its form as
// username. It returns the callback URL the provider sends the browser back to, not yet
// visited, so the test chooses where and how to send it. c must keep cookies and must not
// follow redirects itself.
func (p *Provider) SignIn(t *testing.T, c *http.Client, start *http.Response, username string) string {
	t.Helper()
	issuer, err := url.Parse(p.Issuer)
	if err != nil {
		t.Fatalf("oidctest: issuer: %v", err)
	}
	resp := start
	for range 10 {
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("oidctest: %s %s answered %d without a Location: %v", resp.Request.Method, resp.Request.URL, resp.StatusCode, err)
		}
		if loc.Host != issuer.Host {
			if resp == start {
				t.Fatalf("oidctest: the sign-in started by sending the browser to %s, not to the provider", loc)
			}
			return loc.String()
		}
		if loc.Path == "/signin" {
			resp, err = c.PostForm(p.Issuer+"/signin", url.Values{"id": {loc.Query().Get("id")}, "username": {username}})
		} else {
			resp, err = c.Get(loc.String())
		}
		if err != nil {
			t.Fatalf("oidctest: %v", err)
		}
	}
	t.Fatal("oidctest: the provider redirected more than 10 times")
	return ""
}
