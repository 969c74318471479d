package main

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestTrustedProxiesSetting(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DATABASE_URL": "postgres://settle@localhost/settle", "SETTLE_TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.7 ,fd00::1/8"}
	cfg, err := LoadConfig([]string{"serve"}, env(vars), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8")}
	if !reflect.DeepEqual(cfg.Web.TrustedProxies, want) {
		t.Errorf("trusted proxies %v, want %v", cfg.Web.TrustedProxies, want)
	}

	vars["SETTLE_TRUSTED_PROXIES"] = "10.0.0.0/8,proxy.internal"
	code, _, stderr := run(t, []string{"serve"}, vars, "")
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `SETTLE_TRUSTED_PROXIES: "proxy.internal" is not an address`) {
		t.Errorf("a host name among the proxies: exit %d, %q; want 2 and one line naming it", code, stderr)
	}
}

// The served program throttles and audits sign-ins per client: behind a trusted proxy (the
// test's loopback) the X-Forwarded-For client that guessed waits, another one signs in.
func TestServeThrottlesAndAuditsSignIns(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(map[string]string{
		"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t)), "SETTLE_TRUSTED_PROXIES": "127.0.0.0/8"}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if _, err := accountstore.New(p.DB).CreateUser(ctx, "owner@example.com", "correct horse battery", desk.RoleSupport); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(client, pw string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, p.URL()+"/login",
			strings.NewReader(url.Values{"email": {"owner@example.com"}, "password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", client)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 4 {
		login("203.0.113.5", "guess")
	}
	if r := login("203.0.113.5", "correct horse battery"); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("the guessing client = %d with Retry-After %q; want 429 with a wait", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := login("198.51.100.7", "correct horse battery"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("another client with the right password = %d, want 303", r.StatusCode)
	}
	page, err := deskstore.New(p.DB).AuditLog(ctx, desk.AuditFilter{Actor: "ip:203.0.113.5", Action: "login.failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 4 {
		t.Errorf("%d login.failed rows for the guessing client, want 4", len(page.Entries))
	}
}
