package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/web"
)

// TestCookiesAreSecureWhenConfigured: with secure cookies on (SETTLE_SECURE_COOKIES, for a
// dashboard served over TLS, a proxy's included), the session cookie a sign-in sets and the
// cookie of a single sign-on in progress are sent over HTTPS only, kept from scripts, and
// left out of cross-site requests other than top-level navigations; the flow's cookie goes
// to the sign-in's own routes only.
func TestCookiesAreSecureWhenConfigured(t *testing.T) {
	t.Parallel()
	e := newSSOEnvWith(t, false, nil, func(s *web.Server, tw *testworld.World) {
		s.Sessions = web.NewSessions(tw.DB.SessionStore(), true)
	})
	if _, err := accounts(e.db).CreateUser(t.Context(), "olga@corp.example", password, desk.RoleOncall); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	resp, err := c.PostForm(e.url+"/login", url.Values{"email": {"olga@corp.example"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantCookie(t, resp, "settle_session", "/")

	resp, err = client(t).Get(e.url + "/login/oidc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantCookie(t, resp, "settle_sso_flow", "/login/oidc")
}

// wantCookie fails unless resp sets the cookie name Secure, HttpOnly, SameSite=Lax on path.
func wantCookie(t *testing.T, resp *http.Response, name, path string) {
	t.Helper()
	for _, ck := range resp.Cookies() {
		if ck.Name != name {
			continue
		}
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != path {
			t.Errorf("cookie %s set as %q; want Secure, HttpOnly, SameSite=Lax, Path=%s", name, ck.String(), path)
		}
		return
	}
	t.Errorf("%s %s set no cookie %s (%d)", resp.Request.Method, resp.Request.URL.Path, name, resp.StatusCode)
}
