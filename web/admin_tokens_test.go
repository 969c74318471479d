package web_test

import (
	"context"
	"crypto/sha256"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

var issuedToken = regexp.MustCompile(`data-testid="token-value">(stl_[0-9a-f]{64})<`)

// whoami calls the API with a bearer token and returns the status.
func (e *dashEnv) whoami(t *testing.T, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (e *dashEnv) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *dashEnv) auditCount(t *testing.T, action string) int {
	t.Helper()
	p, err := deskstore.New(e.db).AuditLog(context.Background(), desk.AuditFilter{Action: action, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Entries)
}

// An admin issues a token for a new tenant, sees it once, and revokes it: the API refuses
// it at once, although the token cache would have kept it for an hour.
func TestAdminIssuesAndRevokesTokens(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	resp, err := admin.PostForm(e.url+"/admin/tokens", url.Values{"tenant": {"acme-chat"}, "name": {"chat backend"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	m := issuedToken.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("issue = %d; token shown: %v\n%s", resp.StatusCode, m != nil, body)
	}
	token := m[1]
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page with the token has Cache-Control %q, want no-store", cc)
	}
	// Only the hash is kept.
	sum := sha256.Sum256([]byte(token))
	if n := e.count(t, `SELECT count(*) FROM api_tokens WHERE token_hash = $1 AND name = 'chat backend'`, sum[:]); n != 1 {
		t.Fatalf("%d rows hold the token's hash", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE after::text LIKE '%' || $1 || '%'`, token[8:]); n != 0 {
		t.Fatal("the token's secret part reached the audit log")
	}
	if !regexp.MustCompile(`data-testid="token-last-used">never<`).MatchString(body) {
		t.Error("a token not used yet does not say never")
	}
	if code := e.whoami(t, token); code != http.StatusOK {
		t.Fatalf("the new token on /api/v1/whoami = %d", code)
	}
	// The list shows the prefix, never the token, and the page does not show it again.
	_, list := e.page(t, admin, "/admin/tokens")
	mustContain(t, list, `data-prefix="`+token[:8]+`"`, "acme-chat", "chat backend")
	if issuedToken.MatchString(list) || regexp.MustCompile(token[8:]).MatchString(list) {
		t.Fatal("the token is shown again")
	}
	tokens, err := accountstore.New(e.db).Tokens(context.Background())
	if err != nil || len(tokens) != 1 || tokens[0].LastUsedAt == nil {
		t.Fatalf("tokens %+v, %v; want one, used", tokens, err)
	}
	id := itoa(tokens[0].ID)
	if r := e.post(t, admin, "/admin/tokens/"+id+"/revoke", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", r.StatusCode)
	}
	if code := e.whoami(t, token); code != http.StatusUnauthorized {
		t.Fatalf("a revoked token on /api/v1/whoami = %d, want 401", code)
	}
	_, list = e.page(t, admin, "/admin/tokens")
	mustContain(t, list, `data-testid="token-revoked"`, html.EscapeString("Revoked "+token[:8]+"… of acme-chat."))
	// Revoking twice changes nothing; each change has one audit row naming the admin.
	e.post(t, admin, "/admin/tokens/"+id+"/revoke", nil)
	if n := e.auditCount(t, "token.add"); n != 1 {
		t.Errorf("%d token.add rows", n)
	}
	if n := e.auditCount(t, "token.revoke"); n != 1 {
		t.Errorf("%d token.revoke rows", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE action LIKE 'token.%' AND actor = 'admin@example.com' AND entity_id = $1`, id); n != 2 {
		t.Errorf("%d token audit rows name the admin", n)
	}
}

func TestTokenAdminBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	tenantsBefore := e.count(t, `SELECT count(*) FROM tenants`)
	for _, form := range []url.Values{
		{"tenant": {"Acme Corp!"}, "name": {"x"}},
		{"tenant": {""}, "name": {"x"}},
	} {
		resp, err := admin.PostForm(e.url+"/admin/tokens", form)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || issuedToken.Match(b) {
			t.Fatalf("tenant %q: %d", form.Get("tenant"), resp.StatusCode)
		}
		mustContain(t, string(b), "Tenant name", `value="`+html.EscapeString(form.Get("tenant"))+`"`)
	}
	long := url.Values{"tenant": {"brand-new"}, "name": {strings.Repeat("n", 101)}}
	if resp, _ := admin.PostForm(e.url+"/admin/tokens", long); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a 101-character name = %d, want 422", resp.StatusCode)
	}
	for path, want := range map[string]int{"/admin/tokens/abc/revoke": 404, "/admin/tokens/999999/revoke": 404, "/admin/tokens/-1/revoke": 404} {
		if r := e.post(t, admin, path, nil); r.StatusCode != want {
			t.Errorf("POST %s = %d, want %d", path, r.StatusCode, want)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("%d tokens after refused forms", n)
	}
	if n := e.count(t, `SELECT count(*) FROM tenants`); n != tenantsBefore {
		t.Errorf("tenants went from %d to %d", tenantsBefore, n)
	}
	if n := e.auditCount(t, "token.add") + e.auditCount(t, "token.revoke"); n != 0 {
		t.Errorf("%d token audit rows after refusals", n)
	}
}
