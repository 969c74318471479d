package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// TestBrowserSSOSignInWithMappedRole: people sign in through the provider and land on the
// dashboard with the role their groups map to (the most powerful of several); the first
// sign-in creates the user, audited with the issuer; an on-call person sees the bulk
// lookup and a support person does not; when the provider moves someone to another group,
// their next sign-in follows it, audited.
func TestBrowserSSOSignInWithMappedRole(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	e.notSentUnknown(t, "7001")
	e.idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"staff", "settle-oncall"}})
	e.idp.AddPerson(oidctest.Person{Username: "sam", Subject: "sub-sam", Email: "sam@corp.example", Groups: []string{"settle-support"}})
	e.idp.AddPerson(oidctest.Person{Username: "ada", Subject: "sub-ada", Email: "ada@corp.example", Groups: []string{"settle-support", "settle-admins", "settle-oncall"}})
	alloc := browser(t)

	olga := newSession(t, alloc)
	e.ssoLogin(t, olga, "olga")
	if got := textOf(t, olga, "nav-role"); got != "oncall" {
		t.Fatalf("olga's role = %q, want oncall", got)
	}
	do(t, olga, "olga's queue", chromedp.Navigate(e.url+"/ops?tab=unknown&refresh=0"), chromedp.WaitVisible(byID("bulk-actions")))
	shot(t, olga, "sso-oncall")

	sam := newSession(t, alloc)
	e.ssoLogin(t, sam, "sam")
	if got := textOf(t, sam, "nav-role"); got != "support" {
		t.Fatalf("sam's role = %q, want support", got)
	}
	do(t, sam, "sam's queue", chromedp.Navigate(e.url+"/ops?tab=unknown&refresh=0"), chromedp.WaitVisible(byID("queue-table")))
	if n := count(t, sam, `[data-testid="bulk-actions"], [data-testid="lookup-filter"]`); n != 0 {
		t.Fatalf("support sees %d on-call actions", n)
	}

	ada := newSession(t, alloc)
	e.ssoLogin(t, ada, "ada")
	if got := textOf(t, ada, "nav-role"); got != "admin" {
		t.Fatalf("ada, in support, oncall and admins, has role %q, want admin", got)
	}

	u := e.userByEmail(t, "olga@corp.example")
	if u == nil || u.Role != desk.RoleOncall {
		t.Fatalf("olga's user = %+v, want oncall", u)
	}
	if _, err := accountstore.New(e.db).Authenticate(context.Background(), "olga@corp.example", ""); err == nil {
		t.Fatal("a user of the provider signs in with an empty password")
	}
	var added map[string]any
	for _, a := range e.auditRows(t, "user.add") {
		if a.EntityID == strconv.FormatInt(u.ID, 10) {
			added = jsonOf(t, a.After)
			if a.Actor != "oidc:"+e.idp.Issuer {
				t.Errorf("user.add actor = %q, want the issuer", a.Actor)
			}
		}
	}
	if added == nil || added["role"] != "oncall" || added["issuer"] != e.idp.Issuer || added["subject"] != "sub-olga" || added["email"] != "olga@corp.example" {
		t.Fatalf("olga's user.add audit row = %v", added)
	}

	e.idp.AddPerson(oidctest.Person{Username: "sam", Subject: "sub-sam", Email: "sam@corp.example", Groups: []string{"settle-oncall"}})
	again := newSession(t, alloc)
	e.ssoLogin(t, again, "sam")
	if got := textOf(t, again, "nav-role"); got != "oncall" {
		t.Fatalf("sam after moving to settle-oncall has role %q", got)
	}
	changed := e.auditRows(t, "user.role")
	if len(changed) != 1 || jsonOf(t, changed[0].Before)["role"] != "support" || jsonOf(t, changed[0].After)["role"] != "oncall" {
		t.Fatalf("user.role audit rows = %+v", changed)
	}
	if n := len(e.auditRows(t, "user.add")); n != 3 {
		t.Fatalf("%d user.add rows after four sign-ins of three people, want 3", n)
	}
}

// TestBrowserSSOUnmappedPersonRefused: a person in none of the mapped groups gets a page
// saying so, no user, and an audited refusal.
func TestBrowserSSOUnmappedPersonRefused(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	e.idp.AddPerson(oidctest.Person{Username: "eve", Subject: "sub-eve", Email: "eve@corp.example", Groups: []string{"contractors"}})
	ctx := newSession(t, browser(t))
	e.atProvider(t, ctx, "eve")
	status, msg := errorPage(t, ctx)
	if status != "403" || !strings.Contains(msg, "none of your groups") || !strings.Contains(msg, "eve@corp.example") {
		t.Fatalf("eve sees %s %q", status, msg)
	}
	shot(t, ctx, "sso-unmapped")
	if u := e.userByEmail(t, "eve@corp.example"); u != nil {
		t.Fatalf("eve was made a user: %+v", u)
	}
	rows := e.auditRows(t, "login.refused")
	if len(rows) != 1 || rows[0].EntityID != "eve@corp.example" || rows[0].Actor != "oidc:"+e.idp.Issuer {
		t.Fatalf("login.refused rows = %+v", rows)
	}
	if after := jsonOf(t, rows[0].After); after["reason"] != "no_mapped_group" || after["subject"] != "sub-eve" {
		t.Fatalf("refusal recorded as %v", after)
	}
	do(t, ctx, "the dashboard still asks to sign in", chromedp.Navigate(e.url+"/ops"), chromedp.WaitVisible(byID("login-sso")))
}

// TestBrowserSSOBadCallbacksRefused: a callback with another state, the same callback
// twice, the provider's error, and a callback after the flow's lifetime each get a
// readable page and change nothing; a tampered callback also spends the sign-in it
// tampered with.
func TestBrowserSSOBadCallbacksRefused(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	e.idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"settle-oncall"}})
	alloc := browser(t)
	refused := func(ctx context.Context, what, uri, want string) {
		t.Helper()
		do(t, ctx, what, chromedp.Navigate(e.url+uri))
		if status, msg := errorPage(t, ctx); status != "400" || !strings.Contains(msg, want) {
			t.Fatalf("%s: %s %q, want 400 with %q", what, status, msg, want)
		}
	}

	tamper := newSession(t, alloc)
	e.front.hold.Store(true)
	e.atProvider(t, tamper, "olga")
	do(t, tamper, "the callback is held", chromedp.WaitVisible(byID("held")))
	held := e.front.lastCallback(t)
	e.front.hold.Store(false)
	refused(tamper, "tampered state", withQuery(t, held, "state", "forged-state"), "does not belong")
	shot(t, tamper, "sso-tampered")
	refused(tamper, "the genuine callback after the tampered one", held, "already used")
	if n := e.idp.ExchangedCodes(); n != 0 {
		t.Fatalf("%d codes exchanged for refused callbacks", n)
	}

	replay := newSession(t, alloc)
	e.ssoLogin(t, replay, "olga")
	used := e.front.lastCallback(t)
	users, audits := len(e.usersNow(t)), len(e.auditRows(t, "user.add"))
	refused(replay, "the callback replayed", used, "already used")
	if len(e.usersNow(t)) != users || len(e.auditRows(t, "user.add")) != audits || e.idp.ExchangedCodes() != 1 {
		t.Fatal("a replayed callback changed users, the audit log or exchanged a code")
	}

	idpErr := newSession(t, alloc)
	do(t, idpErr, "start a sign-in", chromedp.Navigate(e.url+"/login/oidc"), chromedp.WaitVisible(byID("idp-form")))
	refused(idpErr, "the provider's error", "/login/oidc/callback?error=access_denied&error_description=The+user+cancelled&state=x", "access_denied")

	late := newSession(t, alloc)
	e.front.hold.Store(true)
	e.atProvider(t, late, "olga")
	do(t, late, "the callback is held", chromedp.WaitVisible(byID("held")))
	held = e.front.lastCallback(t)
	e.front.hold.Store(false)
	e.clock.Advance(11 * time.Minute)
	refused(late, "a callback after the flow's lifetime", held, "took longer")
	do(t, late, "not signed in", chromedp.Navigate(e.url+"/ops"), chromedp.WaitVisible(byID("login-sso")))
}

// TestBrowserSSOPasswordLoginOff: with password sign-in off the page offers only the
// provider, and a password POST is refused even with the right password.
func TestBrowserSSOPasswordLoginOff(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, true)
	if _, err := accounts(e.db).CreateUser(context.Background(), "pat@corp.example", password, desk.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	e.idp.AddPerson(oidctest.Person{Username: "olga", Subject: "sub-olga", Email: "olga@corp.example", Groups: []string{"settle-oncall"}})
	ctx := newSession(t, browser(t))
	do(t, ctx, "sign-in page", chromedp.Navigate(e.url+"/login"), chromedp.WaitVisible(byID("login-sso")))
	if got := textOf(t, ctx, "login-sso"); got != "Sign in with Test IdP" {
		t.Errorf("the button reads %q", got)
	}
	if n := count(t, ctx, `[data-testid="login-form"], input[type="password"]`); n != 0 {
		t.Fatalf("the page still has %d password form elements", n)
	}
	shot(t, ctx, "sso-password-off")

	c := client(t)
	resp, err := c.PostForm(e.url+"/login", url.Values{"email": {"pat@corp.example"}, "password": {password}, "next": {"/ops"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a password POST got %d, want 403", resp.StatusCode)
	}
	resp, err = c.Get(e.url + "/ops")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("after the refused POST /ops answers %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	e.ssoLogin(t, ctx, "olga")
}
