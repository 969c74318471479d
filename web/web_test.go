package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/web"
)

const password = "correct horse battery"

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

type env struct {
	db  *pg.DB
	url string
}

// newServer returns a fresh world (its own database, the fakes on demand) and the web
// server on its database, on a manual clock at t0.
func newServer(t *testing.T) (*web.Server, *testworld.World) {
	t.Helper()
	tw := testworld.New(t)
	s := tw.Server(ops.NewManualClock(t0))
	// An unknown email is compared against a hash at the store's cost: the tests' cost.
	s.Accounts = accounts(tw.DB)
	return s, tw
}

// start serves h on loopback; the env reaches the world's database.
func start(t *testing.T, tw *testworld.World, h http.Handler) *env {
	t.Helper()
	return &env{db: tw.DB, url: tw.Serve(h)}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s, tw := newServer(t)
	return start(t, tw, s.Handler())
}

// client is a browser without redirects, so tests see each answer.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) user(t *testing.T, email string, role desk.Role) *desk.User {
	t.Helper()
	u, err := accounts(e.db).CreateUser(context.Background(), email, password, role)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (e *env) login(t *testing.T, c *http.Client, email, pw string) *http.Response {
	t.Helper()
	resp, err := c.PostForm(e.url+"/login", url.Values{"email": {email}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (e *env) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(e.url + path)
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

func sessionCookie(t *testing.T, e *env, c *http.Client) string {
	t.Helper()
	u, _ := url.Parse(e.url)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "settle_session" {
			return ck.Value
		}
	}
	return ""
}

func TestLoginSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// At the product's bcrypt cost, unlike the other tests' users (see accounts).
	if _, err := productAccounts(e.db).CreateUser(context.Background(), "oncall@example.com", password, desk.RoleOncall); err != nil {
		t.Fatal(err)
	}
	c := client(t)

	resp := e.login(t, c, "oncall@example.com", password)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops" {
		t.Fatalf("login answered %d to %q; want 303 to /ops", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "settle_session" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie %+v; want HttpOnly and SameSite=Lax", ck)
	}

	r, body := e.get(t, c, "/ops")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /ops = %d\n%s", r.StatusCode, body)
	}
	for _, want := range []string{"oncall@example.com", `data-testid="nav-role">oncall<`, "No operations in this queue."} {
		if !strings.Contains(body, want) {
			t.Errorf("queue page lacks %q", want)
		}
	}

	if r, _ := e.get(t, c, "/"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ops" {
		t.Errorf("GET / = %d to %q; want 303 to /ops", r.StatusCode, r.Header.Get("Location"))
	}
}

func TestLoginFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// At the product's bcrypt cost, unlike the other tests' users (see accounts).
	if _, err := productAccounts(e.db).CreateUser(context.Background(), "support@example.com", password, desk.RoleSupport); err != nil {
		t.Fatal(err)
	}
	c := client(t)

	resp := e.login(t, c, "support@example.com", "not the password")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad password answered %d; want 401", resp.StatusCode)
	}
	if !strings.Contains(string(body), `data-testid="login-error"`) || !strings.Contains(string(body), `value="support@example.com"`) {
		t.Errorf("the login page should show the error and keep the email:\n%s", body)
	}
	if sessionCookie(t, e, c) != "" {
		t.Error("a failed login must not create a session")
	}
	if r, _ := e.get(t, c, "/ops"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("after a failed login GET /ops = %d; want a redirect to login", r.StatusCode)
	}
}

func TestOpsRedirectsToLoginWithoutSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.get(t, client(t), "/ops?tab=expired")
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /ops without a session = %d; want 303", r.StatusCode)
	}
	if got, want := r.Header.Get("Location"), "/login?next="+url.QueryEscape("/ops?tab=expired"); got != want {
		t.Errorf("redirect to %q, want %q", got, want)
	}
}

func TestLoginReturnsToNextButNeverOffSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user(t, "a@example.com", desk.RoleSupport)
	for next, want := range map[string]string{
		"/ops?tab=expired":     "/ops?tab=expired",
		"//evil.example/x":     "/ops",
		"https://evil.example": "/ops",
		`/\evil.example`:       "/ops",
	} {
		c := client(t)
		resp, err := c.PostForm(e.url+"/login", url.Values{"email": {"a@example.com"}, "password": {password}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("next=%q redirected to %q, want %q", next, got, want)
		}
	}
}

func TestSessionRenewedOnLoginAndLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user(t, "a@example.com", desk.RoleOncall)
	c := client(t)

	e.login(t, c, "a@example.com", password)
	first := sessionCookie(t, e, c)
	if first == "" {
		t.Fatal("no session cookie after login")
	}
	e.login(t, c, "a@example.com", password)
	second := sessionCookie(t, e, c)
	if second == "" || second == first {
		t.Fatalf("session token not renewed on login: %q then %q", first, second)
	}
	// The old token must be worthless, or an attacker who planted it keeps the session.
	old := client(t)
	u, _ := url.Parse(e.url)
	old.Jar.SetCookies(u, []*http.Cookie{{Name: "settle_session", Value: first}})
	if r, _ := e.get(t, old, "/ops"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("the pre-login token still opens /ops: %d", r.StatusCode)
	}

	resp, err := c.Post(e.url+"/logout", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if third := sessionCookie(t, e, c); third == second {
		t.Error("session token not renewed on logout")
	}
	if r, _ := e.get(t, c, "/ops"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout GET /ops = %d; want a redirect to login", r.StatusCode)
	}
}

func TestRoleRefused(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.HandlerWithPage("/admin-only", desk.RoleAdmin, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "admin page")
	})
	e := start(t, tw, h)
	e.user(t, "manager@example.com", desk.RoleManager)
	e.user(t, "admin@example.com", desk.RoleAdmin)

	c := client(t)
	e.login(t, c, "manager@example.com", password)
	r, body := e.get(t, c, "/admin-only")
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("manager on an admin page = %d; want 403", r.StatusCode)
	}
	if !strings.Contains(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `data-testid="error-message"`) {
		t.Errorf("people should get the error page, got %s:\n%s", r.Header.Get("Content-Type"), body)
	}
	if !strings.Contains(body, "needs the admin role") {
		t.Errorf("the page should say which role is needed:\n%s", body)
	}

	c = client(t)
	e.login(t, c, "admin@example.com", password)
	if r, body := e.get(t, c, "/admin-only"); r.StatusCode != http.StatusOK || body != "admin page" {
		t.Errorf("admin on an admin page = %d %q", r.StatusCode, body)
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user(t, "a@example.com", desk.RoleSupport)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/login",
		strings.NewReader(url.Values{"email": {"a@example.com"}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST /login = %d; want 403", resp.StatusCode)
	}
	if len(resp.Cookies()) != 0 {
		t.Error("a refused login must not set a cookie")
	}

	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Body = io.NopCloser(strings.NewReader(url.Values{"email": {"a@example.com"}, "password": {password}}.Encode()))
	resp, err = client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("same-origin POST /login = %d; want 303", resp.StatusCode)
	}
}

func TestAPIToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tn, err := e.db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	token, err := e.db.CreateToken(ctx, tn.ID, "test")
	if err != nil {
		t.Fatal(err)
	}

	call := func(auth string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/whoami", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return resp, v
	}

	resp, v := call("Bearer " + token)
	if resp.StatusCode != http.StatusOK || v["tenant"] != "acme" {
		t.Fatalf("whoami = %d %v", resp.StatusCode, v)
	}

	for _, auth := range []string{"", "Bearer stl_" + strings.Repeat("ab", 32), "Basic " + token, "Bearer"} {
		resp, v := call(auth)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d; want 401", auth, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Authorization %q: Content-Type %q", auth, ct)
		}
		if v["code"] != "unauthorized" || v["status"] != float64(401) || v["type"] == nil || v["title"] == nil || v["detail"] == "" {
			t.Errorf("Authorization %q: problem %v", auth, v)
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: no WWW-Authenticate challenge", auth)
		}
	}
}

func TestAPINotFoundIsProblemJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.url + "/v1/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("GET /v1/nothing-here = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r, body := e.get(t, client(t), "/nothing-here")
	if r.StatusCode != http.StatusNotFound || !strings.Contains(body, `data-testid="error-status">404<`) {
		t.Fatalf("GET /nothing-here = %d\n%s", r.StatusCode, body)
	}
}

type downDB struct{}

func (downDB) Writable(context.Context) error { return io.ErrUnexpectedEOF }

func TestReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r, body := e.get(t, client(t), "/readyz"); r.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("/readyz = %d %q", r.StatusCode, body)
	}
	if r, body := e.get(t, client(t), "/healthz"); r.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q", r.StatusCode, body)
	}

	s, tw := newServer(t)
	s.DB = downDB{}
	down := start(t, tw, s.Handler())
	r, body := down.get(t, client(t), "/readyz")
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("/readyz with the database down = %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if strings.Contains(body, io.ErrUnexpectedEOF.Error()) {
		t.Errorf("/readyz leaks the internal error: %s", body)
	}
}

func TestMetricsCountRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := client(t)
	e.get(t, c, "/healthz")
	e.get(t, c, "/healthz")
	e.get(t, c, "/ops")
	_, body := e.get(t, c, "/metrics")
	for _, want := range []string{
		`http_requests_total{code="200",method="GET",route="/healthz"} 2`,
		`http_requests_total{code="303",method="GET",route="/ops"} 1`,
		`http_request_duration_seconds_bucket{method="GET",route="/healthz",le="+Inf"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestStaticCSS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, body := e.get(t, client(t), "/static/app.css")
	if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") || len(body) == 0 {
		t.Fatalf("/static/app.css = %d %s (%d bytes)", r.StatusCode, r.Header.Get("Content-Type"), len(body))
	}
}

func TestQueuePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.user(t, "oncall@example.com", desk.RoleOncall)
	tn, err := e.db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	open := func(order string, at time.Time) *ops.Operation {
		op := &ops.Operation{
			ID: ops.NewOperationID(), TenantID: tn.ID, Kind: ops.KindRefund, Provider: "stripe",
			IntentKey: order, ProviderKey: ops.NewProviderKey(), Fingerprint: "fp-" + order,
			OrderRef: order, AmountCents: 1250, Currency: "eur",
		}
		got, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: at, Claim: "worker-1", LeaseUntil: at.Add(time.Minute), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return got.Op
	}
	// Three in progress with leases long run out, one moved to unknown.
	a := open("ord_a", t0.Add(-3*time.Hour))
	open("ord_b", t0.Add(-2*time.Hour))
	open("ord_c", t0.Add(-time.Hour))
	if _, err := e.db.Transition(ctx, ops.TransitionParams{ID: a.ID, Version: a.Version, From: ops.StatusInProgress,
		To: ops.StatusUnknown, Now: t0, Actor: "test", Action: "mark_unknown"}); err != nil {
		t.Fatal(err)
	}

	c := client(t)
	e.login(t, c, "oncall@example.com", password)

	r, body := e.get(t, c, "/ops")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /ops = %d\n%s", r.StatusCode, body)
	}
	for _, want := range []string{
		`data-testid="queue-count-unknown">1<`, `data-testid="queue-count-in_progress">2<`, `data-testid="queue-count-expired">0<`,
		"ord_a", "12.50 EUR", "3h 0m", `href="/ops/` + a.ID + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("unknown tab lacks %q", want)
		}
	}

	r, body = e.get(t, c, "/ops?tab=in_progress&tenant=acme&kind=refund&provider=stripe")
	if r.StatusCode != http.StatusOK || strings.Count(body, `data-testid="queue-row"`) != 2 || strings.Count(body, `data-testid="op-stalled"`) != 2 {
		t.Fatalf("in progress tab: %d, %d rows, %d stalled", r.StatusCode,
			strings.Count(body, `data-testid="queue-row"`), strings.Count(body, `data-testid="op-stalled"`))
	}
	if strings.Contains(body, "ord_a") {
		t.Error("the unknown operation shows in the in-progress tab")
	}

	if _, body := e.get(t, c, "/ops?tab=in_progress&q=nothing"); !strings.Contains(body, "No operations in this queue.") {
		t.Error("a search with no match should show the empty state")
	}
	if _, body := e.get(t, c, "/ops?tab=in_progress&age=90m"); strings.Count(body, `data-testid="queue-row"`) != 1 {
		t.Error("older than 90m should keep only ord_b")
	}

	for _, bad := range []string{"?tab=succeeded", "?tenant=nobody", "?kind=wire", "?age=soon", "?after_id=x&after_created=now"} {
		if r, body := e.get(t, c, "/ops"+bad); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-message"`) {
			t.Errorf("GET /ops%s = %d; want 422 with the error page", bad, r.StatusCode)
		}
	}
}

func TestQueuePagesWithKeysetCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.user(t, "oncall@example.com", desk.RoleOncall)
	tn, err := e.db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 51 {
		at := t0.Add(-time.Duration(100-i) * time.Minute)
		order := "ord_" + strings.Repeat("x", i%3) + at.Format("150405")
		op := &ops.Operation{ID: ops.NewOperationID(), TenantID: tn.ID, Kind: ops.KindLLMCall, Provider: "openai",
			IntentKey: order, ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", OrderRef: order}
		if _, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: at, Claim: "w", LeaseUntil: t0.Add(time.Hour), Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t)
	e.login(t, c, "oncall@example.com", password)
	_, body := e.get(t, c, "/ops?tab=in_progress")
	if n := strings.Count(body, `data-testid="queue-row"`); n != 50 {
		t.Fatalf("first page has %d rows, want 50", n)
	}
	i := strings.Index(body, `data-testid="queue-next"`)
	if i < 0 {
		t.Fatal("no next page link")
	}
	start := strings.LastIndex(body[:i], `href="`) + len(`href="`)
	next := strings.ReplaceAll(body[start:start+strings.Index(body[start:], `"`)], "&amp;", "&")
	if !strings.Contains(next, "after_created=") || !strings.Contains(next, "after_id=") || !strings.Contains(next, "tab=in_progress") {
		t.Fatalf("next link %q", next)
	}
	r, body := e.get(t, c, next)
	if r.StatusCode != http.StatusOK || strings.Count(body, `data-testid="queue-row"`) != 1 || strings.Contains(body, `data-testid="queue-next"`) {
		t.Fatalf("second page: %d, %d rows", r.StatusCode, strings.Count(body, `data-testid="queue-row"`))
	}
}
