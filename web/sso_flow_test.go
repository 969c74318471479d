package web_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/settle-dev/settle/internal/oidctest"
)

// TestSSOStartWritesNoSession: anonymous visits to /login/oidc, however many, add no row to
// the session store: the sign-in in progress is kept in the browser, sealed, until the
// provider answers. The sign-in still works end to end and writes the one session it signs
// in.
func TestSSOStartWritesNoSession(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	e.idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"settle-oncall"}})
	before := e.sessionRows(t)
	same := client(t)
	for i := range 60 {
		c := same
		if i%2 == 0 {
			c = client(t)
		}
		for _, path := range []string{"/login/oidc?next=%2Fops", "/login"} {
			resp, _ := e.env.get(t, c, path)
			if path == "/login" && resp.StatusCode != http.StatusOK || path != "/login" && resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("anonymous GET %s answered %d", path, resp.StatusCode)
			}
		}
	}
	if n := e.sessionRows(t) - before; n != 0 {
		t.Fatalf("120 anonymous visits to /login/oidc and /login wrote %d session rows", n)
	}

	c := client(t)
	start, err := c.Get(e.url + "/login/oidc?next=" + url.QueryEscape("/ops?tab=expired"))
	if err != nil {
		t.Fatal(err)
	}
	var flow *http.Cookie
	for _, ck := range start.Cookies() {
		switch ck.Name {
		case "settle_session":
			t.Fatalf("the start set a session cookie: %+v", ck)
		case "settle_sso_flow":
			flow = ck
		}
	}
	if flow == nil || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != "/login/oidc" || flow.MaxAge <= 0 || flow.MaxAge > 600 {
		t.Fatalf("the sign-in in progress is kept in %+v; want an HttpOnly, SameSite=Lax cookie on /login/oidc for at most 10 minutes", flow)
	}
	if b, err := base64.RawURLEncoding.DecodeString(flow.Value); err != nil || bytes.Contains(b, []byte(`"verifier"`)) {
		t.Fatalf("the flow cookie is not sealed: %q", b)
	}
	resp, err := c.Get(e.idp.SignIn(t, c, start, "olga"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops?tab=expired" || !e.signedIn(t, c) {
		t.Fatalf("the sign-in answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := e.sessionRows(t) - before; n != 1 {
		t.Fatalf("one sign-in wrote %d session rows, want 1", n)
	}
}
