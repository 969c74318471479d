package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/web"
)

// loginFrom posts the sign-in form to h as a client whose connection comes from addr
// (host:port): the same router and handler a listener would call, with the peer address
// a test cannot otherwise choose.
func loginFrom(t *testing.T, h http.Handler, addr, email, pw string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	form := url.Values{"email": {email}, "password": {pw}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// wantLogin fails unless rec has the status and Retry-After ("" for none).
func wantLogin(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, retryAfter string) {
	t.Helper()
	if rec.Code != status || rec.Header().Get("Retry-After") != retryAfter {
		t.Fatalf("%s: %d with Retry-After %q; want %d with %q\n%s", what, rec.Code, rec.Header().Get("Retry-After"), status, retryAfter, rec.Body)
	}
}

func auditRows(t *testing.T, e *env, action string) []desk.AuditLogEntry {
	t.Helper()
	page, err := deskstore.New(e.db).AuditLog(context.Background(), desk.AuditFilter{Action: action, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

// One address guessing one account's password has three wrong ones free; each further one
// makes it wait 1 s, 2 s, 4 s... up to a minute, and a try within the wait is answered 429
// with Retry-After, the right password included. Every wrong password and the first refusal
// of each wait are in the audit log. The right password after the wait signs in and starts
// the count again.
func TestLoginThrottleGrowsAndResets(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	clock := s.Clock.(*ops.ManualClock)
	h := s.Handler()
	e := start(t, tw, h)
	e.user(t, "owner@example.com", desk.RoleSupport)
	const from = "203.0.113.5:40000"
	fail := func(what string, status int, retryAfter string) *httptest.ResponseRecorder {
		t.Helper()
		rec := loginFrom(t, h, from, "Owner@Example.com", "not the password")
		wantLogin(t, what, rec, status, retryAfter)
		return rec
	}

	for i := range 3 {
		fail("wrong password "+string(rune('1'+i)), http.StatusUnauthorized, "")
	}
	fail("fourth wrong password", http.StatusUnauthorized, "1")
	rec := fail("a guess within the wait", http.StatusTooManyRequests, "1")
	if !strings.Contains(rec.Body.String(), `data-testid="login-error"`) || !strings.Contains(rec.Body.String(), "Try again in 1 second") {
		t.Errorf("the throttled sign-in page should say how long to wait:\n%s", rec.Body)
	}
	fail("a second guess within the same wait", http.StatusTooManyRequests, "1")
	clock.Advance(time.Second)
	fail("fifth wrong password, after the wait", http.StatusUnauthorized, "2")
	fail("a guess within the 2 s wait", http.StatusTooManyRequests, "2")
	clock.Advance(time.Second)
	wantLogin(t, "the right password half-way through the wait", loginFrom(t, h, from, "owner@example.com", password),
		http.StatusTooManyRequests, "1")
	clock.Advance(time.Second)
	fail("sixth wrong password", http.StatusUnauthorized, "4")
	fail("a guess within the 4 s wait", http.StatusTooManyRequests, "4")

	// The wait doubles up to a minute and no further: never a lockout.
	wait := 4 * time.Second
	for range 8 {
		clock.Advance(wait)
		rec := loginFrom(t, h, from, "owner@example.com", "not the password")
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("a wrong password after the wait = %d, want 401", rec.Code)
		}
		d, err := time.ParseDuration(rec.Header().Get("Retry-After") + "s")
		if err != nil || d < wait && d != time.Minute {
			t.Fatalf("Retry-After %q after a %s wait; want it to grow", rec.Header().Get("Retry-After"), wait)
		}
		wait = d
	}
	if wait != time.Minute {
		t.Fatalf("the wait grew to %s; want it capped at 1m", wait)
	}

	clock.Advance(wait)
	rec = loginFrom(t, h, from, "owner@example.com", password)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("the right password after the wait = %d, want 303\n%s", rec.Code, rec.Body)
	}
	fail("a wrong password after signing in counts from zero", http.StatusUnauthorized, "")

	failed := auditRows(t, e, "login.failed")
	if len(failed) != 3+1+1+1+8+1 {
		t.Fatalf("%d login.failed rows; want one per wrong password that was checked (15)", len(failed))
	}
	last := failed[0]
	var after map[string]any
	if err := json.Unmarshal(last.After, &after); err != nil {
		t.Fatal(err)
	}
	if last.EntityID != "owner@example.com" || last.Actor != "ip:203.0.113.5" || after["failures"] != 1.0 {
		t.Errorf("newest login.failed row %+v after=%s; want entity owner@example.com, actor ip:203.0.113.5, failures 1", last, last.After)
	}
	if throttled := auditRows(t, e, "login.throttled"); len(throttled) != 3 {
		t.Errorf("%d login.throttled rows; want one per wait that refused someone (3)", len(throttled))
	}
}

// An attacker's address waiting for its guesses at an account keeps nobody else out: the
// owner signs in from another address at once, and an IPv6 client's neighbours in its /64
// (one host's usual share) wait with it.
func TestLoginThrottleIsPerAddress(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	e := start(t, tw, h)
	e.user(t, "owner@example.com", desk.RoleSupport)

	for _, attacker := range []string{"203.0.113.5:1234", "[2001:db8:1:2::1]:443"} {
		for range 4 {
			loginFrom(t, h, attacker, "owner@example.com", "guess")
		}
		wantLogin(t, "the attacker's next guess", loginFrom(t, h, attacker, "owner@example.com", "guess"), http.StatusTooManyRequests, "1")
	}
	wantLogin(t, "another port of the attacker's address", loginFrom(t, h, "203.0.113.5:999", "owner@example.com", password),
		http.StatusTooManyRequests, "1")
	wantLogin(t, "another host in the attacker's /64", loginFrom(t, h, "[2001:db8:1:2::99]:443", "owner@example.com", password),
		http.StatusTooManyRequests, "1")

	wantLogin(t, "the owner's wrong password from elsewhere", loginFrom(t, h, "198.51.100.7:5555", "owner@example.com", "typo"),
		http.StatusUnauthorized, "")
	wantLogin(t, "the owner from elsewhere", loginFrom(t, h, "198.51.100.7:5555", "owner@example.com", password),
		http.StatusSeeOther, "")
	wantLogin(t, "the owner from another /64", loginFrom(t, h, "[2001:db8:1:3::1]:443", "owner@example.com", password),
		http.StatusSeeOther, "")
	wantLogin(t, "the attacker after the owner signed in", loginFrom(t, h, "203.0.113.5:1234", "owner@example.com", "guess"),
		http.StatusTooManyRequests, "1")
}

// One address trying a few passwords on each of many accounts waits too, for every account,
// after 20 wrong passwords; the accounts' owners elsewhere do not.
func TestLoginThrottleStopsSprayingFromOneAddress(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	e := start(t, tw, h)
	e.user(t, "victim@example.com", desk.RoleSupport)

	const sprayer = "203.0.113.9:1"
	for i := range 21 {
		rec := loginFrom(t, h, sprayer, "user"+string(rune('a'+i))+"@example.com", "Winter2026!")
		want := ""
		if i == 20 {
			want = "1"
		}
		wantLogin(t, "a guess at another account", rec, http.StatusUnauthorized, want)
	}
	wantLogin(t, "the sprayer at a fresh account", loginFrom(t, h, sprayer, "victim@example.com", password), http.StatusTooManyRequests, "1")
	wantLogin(t, "the victim from home", loginFrom(t, h, "192.0.2.44:1", "victim@example.com", password), http.StatusSeeOther, "")
}

// Behind a trusted reverse proxy the client is the address the proxy put in X-Forwarded-For;
// from anyone else the header is ignored, so it cannot be forged to dodge the count.
func TestLoginThrottleTrustsOnlyConfiguredProxies(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	s.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	h := s.Handler()
	e := start(t, tw, h)
	e.user(t, "owner@example.com", desk.RoleSupport)

	const proxy = "10.1.2.3:8443"
	for range 4 {
		loginFrom(t, h, proxy, "owner@example.com", "guess", "X-Forwarded-For", "198.51.100.1, 203.0.113.5")
	}
	wantLogin(t, "the attacker through the proxy", loginFrom(t, h, proxy, "owner@example.com", password, "X-Forwarded-For", "203.0.113.5"),
		http.StatusTooManyRequests, "1")
	wantLogin(t, "the owner through the proxy", loginFrom(t, h, proxy, "owner@example.com", password, "X-Forwarded-For", "198.51.100.7"),
		http.StatusSeeOther, "")

	for i := range 4 {
		loginFrom(t, h, "203.0.113.77:1", "owner@example.com", "guess", "X-Forwarded-For", "192.0.2."+string(rune('1'+i)))
	}
	wantLogin(t, "a direct client forging X-Forwarded-For", loginFrom(t, h, "203.0.113.77:1", "owner@example.com", password, "X-Forwarded-For", "192.0.2.200"),
		http.StatusTooManyRequests, "1")
}

// When every password-hashing slot is taken, a sign-in is answered at once with 503 and
// Retry-After instead of queueing, and it counts as no wrong password.
func TestLoginBusyWhenPasswordChecksAreFull(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	s.PasswordChecks = web.NewHashLimiter(1, 10*time.Millisecond)
	h := s.Handler()
	e := start(t, tw, h)
	e.user(t, "owner@example.com", desk.RoleSupport)

	if !s.PasswordChecks.Acquire(context.Background()) {
		t.Fatal("the test could not take the only slot")
	}
	for range 5 {
		rec := loginFrom(t, h, "192.0.2.1:1", "owner@example.com", "guess")
		wantLogin(t, "a sign-in with no free slot", rec, http.StatusServiceUnavailable, "1")
		if !strings.Contains(rec.Body.String(), `data-testid="login-form"`) {
			t.Fatalf("the busy answer should be the sign-in page with a message:\n%s", rec.Body)
		}
	}
	s.PasswordChecks.Release()
	wantLogin(t, "a sign-in with the slot free", loginFrom(t, h, "192.0.2.1:1", "owner@example.com", password), http.StatusSeeOther, "")
}
