package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/web"
	"github.com/settle-dev/settle/web/sso"
)

// ssoEnv is the dashboard signing people in through a real OpenID Connect provider on
// loopback, behind a front door that can hold the provider's callbacks so a test may
// tamper with one, replay one, or let one wait too long.
type ssoEnv struct {
	*dashEnv
	idp   *oidctest.Provider
	front *frontDoor
}

const ssoRoles = "settle-support=support,settle-oncall=oncall,settle-managers=manager,settle-admins=admin"

func newSSOEnv(t *testing.T, passwordOff bool) *ssoEnv {
	t.Helper()
	return newSSOEnvWith(t, passwordOff, nil)
}

// newSSOEnvWith is newSSOEnv with the provider's settings changed by cfg (when not nil) and
// the dashboard's dependencies added by wire.
func newSSOEnvWith(t *testing.T, passwordOff bool, cfg func(*sso.Config), wire ...func(*web.Server, *testworld.World)) *ssoEnv {
	t.Helper()
	e := buildDashEnv(t, wire...)
	front := &frontDoor{}
	e.env = start(t, e.world, front)
	e.url = e.env.url
	callback := e.url + "/login/oidc/callback"
	idp := oidctest.Start(t, callback)
	roles, err := desk.ParseRoleMap(ssoRoles)
	if err != nil {
		t.Fatal(err)
	}
	c := sso.Config{Issuer: idp.Issuer, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
		RedirectURL: callback, Name: "Test IdP", RoleClaim: "groups", Roles: roles}
	if cfg != nil {
		cfg(&c)
	}
	p, err := sso.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// The flows are sealed with the database's key, as serve seals them.
	key, err := e.db.SecretKey(context.Background(), "sso_flow", sso.FlowKeySize, t0)
	if err != nil {
		t.Fatal(err)
	}
	flows, err := sso.NewFlowSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	e.server.SSODeps = web.SSODeps{SSO: p, SSOUsers: accountstore.New(e.db), PasswordLoginOff: passwordOff, SSOFlows: flows}
	h := e.server.Handler()
	front.h.Store(&h)
	return &ssoEnv{dashEnv: e, idp: idp, front: front}
}

// frontDoor passes every request to the dashboard, noting the provider's callbacks; while
// hold is set it keeps a callback from the dashboard and answers a page saying so.
type frontDoor struct {
	h         atomic.Pointer[http.Handler]
	hold      atomic.Bool
	mu        sync.Mutex
	callbacks []string
}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/login/oidc/callback" {
		f.mu.Lock()
		f.callbacks = append(f.callbacks, r.URL.RequestURI())
		f.mu.Unlock()
		if f.hold.Load() {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><p data-testid="held">held</p>`)
			return
		}
	}
	(*f.h.Load()).ServeHTTP(w, r)
}

// lastCallback is the path and query of the latest callback the provider sent a browser to.
func (f *frontDoor) lastCallback(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.callbacks) == 0 {
		t.Fatal("the provider sent no browser back to the callback")
	}
	return f.callbacks[len(f.callbacks)-1]
}

// atProvider starts a sign-in from the sign-in page and signs in at the provider as
// username; the browser then follows the provider's redirect back to the callback.
func (e *ssoEnv) atProvider(t *testing.T, ctx context.Context, username string) {
	t.Helper()
	do(t, ctx, username+" signs in at the provider",
		chromedp.Navigate(e.url+"/login"),
		chromedp.WaitVisible(byID("login-sso")),
		chromedp.Click(byID("login-sso")),
		chromedp.WaitVisible(byID("idp-form")),
		loaded(),
		chromedp.SendKeys(byID("idp-username"), username),
		chromedp.Click(byID("idp-submit")),
	)
}

// ssoLogin signs in as username through the provider and waits for the dashboard.
func (e *ssoEnv) ssoLogin(t *testing.T, ctx context.Context, username string) {
	t.Helper()
	e.atProvider(t, ctx, username)
	do(t, ctx, username+" lands on the dashboard", chromedp.WaitVisible(byID("nav-email")), loaded())
}

// errorPage waits for the error page and returns its status and message.
func errorPage(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	do(t, ctx, "error page", chromedp.WaitVisible(byID("error-message")), loaded())
	return textOf(t, ctx, "error-status"), textOf(t, ctx, "error-message")
}

// withQuery is a path and query with one parameter set to v.
func withQuery(t *testing.T, uri, k, v string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// userByEmail is the user with that email in the admin list, nil when there is none.
func (e *ssoEnv) userByEmail(t *testing.T, email string) *desk.UserAccount {
	t.Helper()
	users, err := accountstore.New(e.db).Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range users {
		if users[i].Email == email {
			return &users[i]
		}
	}
	return nil
}

// auditRows are the audit log's rows of one action, newest first.
func (e *ssoEnv) auditRows(t *testing.T, action string) []desk.AuditLogEntry {
	t.Helper()
	p, err := deskstore.New(e.db).AuditLog(context.Background(), desk.AuditFilter{Action: action, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return p.Entries
}

func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("audit json %s: %v", b, err)
	}
	return m
}

func (e *ssoEnv) usersNow(t *testing.T) []desk.UserAccount {
	t.Helper()
	users, err := accountstore.New(e.db).Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// signInOverHTTP starts a sign-in at /login/oidc with next, signs in at the provider as
// username, and returns Settle's answer to the callback and its body, all through c.
func (e *ssoEnv) signInOverHTTP(t *testing.T, c *http.Client, next, username string) (*http.Response, string) {
	t.Helper()
	start, err := c.Get(e.url + "/login/oidc?next=" + url.QueryEscape(next))
	if err != nil {
		t.Fatal(err)
	}
	callback := e.idp.SignIn(t, c, start, username)
	resp, err := c.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// sessionRows counts the rows of the dashboard's session store.
func (e *ssoEnv) sessionRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// signedIn reports whether c holds a dashboard session.
func (e *ssoEnv) signedIn(t *testing.T, c *http.Client) bool {
	t.Helper()
	resp, _ := e.env.get(t, c, "/ops")
	return resp.StatusCode == http.StatusOK
}
