package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// crossSiteTables are where a dashboard form leaves its mark.
var crossSiteTables = []string{"audit_log", "users", "api_tokens", "tenants", "close_proposals", "follow_ups",
	"saved_views", "bulk_lookups", "recon_exceptions", "evidence", "alert_rule_status", "alert_history"}

// TestCrossSitePostsChangeNothing: another site makes a signed-in admin's browser post each
// of the dashboard's forms (add an admin, issue a token, revoke one, disable a user, close,
// approve, follow, save a view, set a tenant's LLM budget, sign out...) with plausible
// values. Whether the browser says so in Sec-Fetch-Site (cross-site, or same-site from a
// sibling host) or, older, only in Origin, every post is refused 403 before its handler
// runs, and nothing is written; the same form from the dashboard itself goes through.
func TestCrossSitePostsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withEveryForm...)
	op := e.refundedButUnknown(t, "csrf-1")
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	victim := e.signIn(t, "victim@example.com", desk.RoleOncall)
	var victimID string
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id::text FROM users WHERE email = 'victim@example.com'`).Scan(&victimID); err != nil {
		t.Fatal(err)
	}
	if resp := e.post(t, admin, "/admin/tokens", url.Values{"tenant": {"shop"}, "name": {"ci"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("issue a token from the dashboard = %d", resp.StatusCode)
	}
	before := e.marks(t)

	form := url.Values{"email": {"mallory@evil.example"}, "password": {password}, "role": {"admin"}, "tenant": {"evil"},
		"name": {"stolen"}, "version": {itoa(op.Version)}, "to": {"succeeded"}, "note": {"closed from elsewhere"},
		"provider_ref": {"re_evil"}, "ids": {op.ID}, "scope": {"selected"}, "label": {"v"}, "query": {"tab=all"},
		"page": {"queue"}, "proposal_id": {"1"}, "action": {"resolve"}, "resolution": {"fixed"}, "assignee": {"mallory"},
		"state": {"silenced"}, "budget": {"0.01"}}.Encode()
	routes := formRoutes(t, e)
	for _, route := range routes {
		path := strings.NewReplacer("/admin/users/{id}", "/admin/users/"+victimID, "/admin/tokens/{id}", "/admin/tokens/1",
			"/tenants/{id}", "/tenants/"+itoa(e.tenant.ID),
			"{id}", op.ID).Replace(route)
		for _, h := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}, {"Origin", "https://evil.example"}} {
			req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(form))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set(h[0], h[1])
			resp, err := admin.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST %s with %s: %s = %d, want 403", path, h[0], h[1], resp.StatusCode)
			}
		}
	}
	if len(routes) < 21 {
		t.Fatalf("walked %d form routes, want every form of the dashboard: %v", len(routes), routes)
	}
	if after := e.marks(t); after != before {
		t.Errorf("cross-site posts changed the database: %v, was %v", after, before)
	}
	if code, _ := e.page(t, victim, "/ops"); code != http.StatusOK {
		t.Errorf("the victim was signed out or disabled from another site: /ops = %d", code)
	}
}

// marks counts the rows of crossSiteTables and reads the refund's version.
func (e *dashEnv) marks(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, table := range crossSiteTables {
		b.WriteString(table + "=" + itoa(int64(e.count(t, `SELECT count(*) FROM `+table))) + " ")
	}
	b.WriteString("disabled=" + itoa(int64(e.count(t, `SELECT count(*) FROM users WHERE disabled_at IS NOT NULL`))))
	b.WriteString(" budgets=" + itoa(int64(e.count(t, `SELECT coalesce(sum(llm_budget_micros), 0) FROM tenants`))))
	b.WriteString(" revoked=" + itoa(int64(e.count(t, `SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL`))))
	b.WriteString(" versions=" + itoa(int64(e.count(t, `SELECT coalesce(sum(version), 0) FROM operations`))))
	return b.String()
}
