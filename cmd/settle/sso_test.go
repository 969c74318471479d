package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// A mistake in the single sign-on settings is one line at start: exit 2 for a setting
// missing or malformed, 1 for an issuer that cannot be reached.
func TestSSOSettingsMistakesAreOneLine(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	base := map[string]string{"DATABASE_URL": "postgres://settle@localhost/settle", "SETTLE_OIDC_ISSUER": "https://idp.example.com",
		"SETTLE_OIDC_CLIENT_ID": "settle", "SETTLE_OIDC_CLIENT_SECRET": "very-secret-value", "SETTLE_EXTERNAL_URL": "https://settle.example.com",
		"SETTLE_OIDC_ROLES": "settle-admins=admin"}
	for _, c := range []struct {
		name   string
		change map[string]string
		code   int
		want   string
	}{
		{"no client id", map[string]string{"SETTLE_OIDC_CLIENT_ID": ""}, 2, "SETTLE_OIDC_CLIENT_ID is not set"},
		{"no issuer", map[string]string{"SETTLE_OIDC_ISSUER": ""}, 2, "SETTLE_OIDC_CLIENT_ID is set but SETTLE_OIDC_ISSUER is not"},
		{"no redirect", map[string]string{"SETTLE_EXTERNAL_URL": ""}, 2, "set SETTLE_OIDC_REDIRECT_URL"},
		{"bad roles", map[string]string{"SETTLE_OIDC_ROLES": "settle-admins=root"}, 2, `unknown role "root"`},
		{"plain http", map[string]string{"SETTLE_OIDC_ISSUER": "http://idp.example.com"}, 2, "is not an https URL"},
		{"password off alone", map[string]string{"SETTLE_OIDC_ISSUER": "", "SETTLE_OIDC_CLIENT_ID": "", "SETTLE_OIDC_CLIENT_SECRET": "",
			"SETTLE_OIDC_ROLES": "", "SETTLE_PASSWORD_LOGIN": "off"}, 2, "leaves no way to sign in"},
		{"unreachable issuer", map[string]string{"SETTLE_OIDC_ISSUER": closed}, 1, "SETTLE_OIDC_ISSUER: read the discovery document of " + closed},
		{"trusted claim alone", map[string]string{"SETTLE_OIDC_ISSUER": "", "SETTLE_OIDC_CLIENT_ID": "", "SETTLE_OIDC_CLIENT_SECRET": "",
			"SETTLE_OIDC_ROLES": "", "SETTLE_OIDC_TRUSTED_EMAIL_CLAIM": "upn"}, 2, "SETTLE_OIDC_TRUSTED_EMAIL_CLAIM is set but SETTLE_OIDC_ISSUER is not"},
		{"trusted claims", map[string]string{"SETTLE_OIDC_TRUSTED_EMAIL_CLAIM": "upn,email"}, 2, "is not the name of one ID token claim"},
	} {
		vars := map[string]string{}
		for k, v := range base {
			vars[k] = v
		}
		for k, v := range c.change {
			vars[k] = v
		}
		code, _, stderr := run(t, []string{"serve", "--addr", "127.0.0.1:0"}, vars, "")
		if code != c.code || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want %d and one line with %q", c.name, code, stderr, c.code, c.want)
		}
		if strings.Contains(stderr, "very-secret-value") {
			t.Errorf("%s: the client secret is in the message", c.name)
		}
	}
}

// serve with a provider offers its button, and with password sign-in off refuses a
// password POST.
func TestServeOffersSSO(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	idp := oidctest.Start(t, "http://"+addr+"/login/oidc/callback")
	cfg, err := LoadConfig([]string{"serve", "--addr", addr}, env(map[string]string{
		"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t)), "SETTLE_OIDC_ISSUER": idp.Issuer, "SETTLE_OIDC_CLIENT_ID": idp.ClientID,
		"SETTLE_OIDC_CLIENT_SECRET": idp.ClientSecret, "SETTLE_EXTERNAL_URL": "http://" + addr, "SETTLE_OIDC_PROVIDER_NAME": "Corp",
		"SETTLE_OIDC_ROLES": "settle-oncall=oncall", "SETTLE_PASSWORD_LOGIN": "off"}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resp, err := http.Get(p.URL() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Sign in with Corp") || strings.Contains(string(body), `type="password"`) {
		t.Fatalf("the sign-in page offers %s", body)
	}
	resp, err = http.PostForm(p.URL()+"/login", map[string][]string{"email": {"a@example.com"}, "password": {"correct horse battery"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a password POST answered %d, want 403", resp.StatusCode)
	}
}

// A sign-in started on one replica finishes on another: the flow the browser keeps is
// sealed with a key every replica reads from the database, and nothing of it is stored
// until the provider answers.
func TestSSOSignInFinishesOnAnotherReplica(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(pgtest.NewDatabase(t))
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	idp := oidctest.Start(t, "http://"+addrs[0]+"/login/oidc/callback")
	idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"settle-oncall"}})
	var urls []string
	for _, addr := range addrs {
		cfg, err := LoadConfig([]string{"serve", "--addr", addr}, env(map[string]string{
			"DATABASE_URL": dbURL, "SETTLE_OIDC_ISSUER": idp.Issuer, "SETTLE_OIDC_CLIENT_ID": idp.ClientID,
			"SETTLE_OIDC_CLIENT_SECRET": idp.ClientSecret, "SETTLE_EXTERNAL_URL": "http://" + addrs[0],
			"SETTLE_OIDC_ROLES": "settle-oncall=oncall"}), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		urls = append(urls, p.URL())
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start, err := c.Get(urls[0] + "/login/oidc?next=%2Fops%3Ftab%3Dexpired")
	if err != nil {
		t.Fatal(err)
	}
	callback, err := url.Parse(idp.SignIn(t, c, start, "olga"))
	if err != nil {
		t.Fatal(err)
	}
	callback.Host = addrs[1]
	resp, err := c.Get(callback.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops?tab=expired" {
		t.Fatalf("the second replica answered the callback %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, u := range urls {
		resp, err := c.Get(u + "/ops")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("signed in at the second replica, GET %s/ops answered %d", u, resp.StatusCode)
		}
	}
}
