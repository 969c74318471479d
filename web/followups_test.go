package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// TestFollowFromTheOperationsPage: the button on /ops/{id} follows and comes back there;
// a closed operation offers no button and refuses a forged follow in words; bad ids are
// pages that say so; someone else's follow-up cannot be marked read.
func TestFollowFromTheOperationsPage(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withFollowUps)
	open := e.notSentUnknown(t, "7001")
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	_, body := e.page(t, oncall, "/ops/"+open.ID)
	mustContain(t, body, `data-testid="follow-button"`, `action="/ops/`+open.ID+`/follow"`)

	resp := e.post(t, oncall, "/ops/"+open.ID+"/follow", url.Values{"back": {"/ops/" + open.ID}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/"+open.ID {
		t.Fatalf("follow answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = e.page(t, oncall, "/ops/"+open.ID)
	mustContain(t, body, "You follow this operation now")
	if resp := e.post(t, oncall, "/ops/"+open.ID+"/follow", url.Values{"back": {"https://evil.example/"}}); resp.Header.Get("Location") != "/ops" {
		t.Fatalf("an outside back link was followed: %q", resp.Header.Get("Location"))
	}
	_, body = e.page(t, oncall, "/follow-ups")
	mustContain(t, body, `data-testid="followup-waiting"`, "order <strong data-testid=\"followup-order\">7001</strong>")

	closed := e.refundedButUnknown(t, "7002")
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	if _, err := e.server.Desk.Lookup(t.Context(), closed.ID, "oncall@example.com"); err != nil {
		t.Fatal(err)
	}
	_, body = e.page(t, support, "/support?q=7002")
	if strings.Contains(body, `data-testid="follow-button"`) {
		t.Fatal("a closed operation offers to follow it")
	}
	e.post(t, support, "/ops/"+closed.ID+"/follow", url.Values{"back": {"/support?q=7002"}})
	_, body = e.page(t, support, "/support?q=7002")
	mustContain(t, body, "Nothing to follow", "already closed as succeeded")

	if resp := e.post(t, support, "/ops/not-an-id/follow", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("following a bad id answered %d", resp.StatusCode)
	}
	if resp := e.post(t, support, "/follow-ups/abc/read", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("marking a bad id read answered %d", resp.StatusCode)
	}
	var theirs string
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id::text FROM follow_ups LIMIT 1`).Scan(&theirs); err != nil {
		t.Fatal(err)
	}
	if resp := e.post(t, support, "/follow-ups/"+theirs+"/read", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("marking another person's follow-up read answered %d", resp.StatusCode)
	}
}

// TestAdminsSeeADisabledPersonsFollowsStopped: the users page says, on a disabled person's
// row, how many of the operations they follow are still open and that those follows are
// stopped (they send the person nothing); enabling the person again takes the note away.
func TestAdminsSeeADisabledPersonsFollowsStopped(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withFollowUps)
	a, b := e.notSentUnknown(t, "7101"), e.notSentUnknown(t, "7102")
	support := e.signIn(t, "follower@example.com", desk.RoleSupport)
	for _, op := range []string{a.ID, b.ID} {
		if resp := e.post(t, support, "/ops/"+op+"/follow", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("follow answered %d", resp.StatusCode)
		}
	}
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	var id string
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id::text FROM users WHERE email = 'follower@example.com'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	_, body := e.page(t, admin, "/admin/users")
	if strings.Contains(body, `data-testid="user-follows-stopped"`) {
		t.Fatal("an enabled person's follows are shown as stopped")
	}
	e.post(t, admin, "/admin/users/"+id+"/disable", nil)
	_, body = e.page(t, admin, "/admin/users")
	mustContain(t, body, `data-testid="user-follows-stopped"`, "2 follows stopped: user disabled", "nothing is sent to them")
	e.post(t, admin, "/admin/users/"+id+"/enable", nil)
	if _, body = e.page(t, admin, "/admin/users"); strings.Contains(body, `data-testid="user-follows-stopped"`) {
		t.Fatal("follows still shown as stopped after the person was enabled again")
	}
}
