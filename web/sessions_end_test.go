package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// TestDisablingAUserEndsTheirSessionsForGood: an admin disables an account whose session
// was taken (a laptop left open, a copied cookie) and re-enables it minutes later for its
// owner; the taken session, unused meanwhile, stays signed out, and the owner signs in
// again with their password. Another person's session is kept.
func TestDisablingAUserEndsTheirSessionsForGood(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	root := e.signIn(t, "root@example.com", desk.RoleAdmin)
	taken := e.signIn(t, "bob@example.com", desk.RoleOncall)
	carol := e.signIn(t, "carol@example.com", desk.RoleOncall)
	var bobID int64
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id FROM users WHERE email = 'bob@example.com'`).Scan(&bobID); err != nil {
		t.Fatal(err)
	}
	e.post(t, root, "/admin/users/"+itoa(bobID)+"/disable", nil)
	e.clock.Advance(5 * time.Minute)
	e.post(t, root, "/admin/users/"+itoa(bobID)+"/enable", nil)

	if code, _ := e.page(t, taken, "/ops"); code != http.StatusSeeOther {
		t.Fatalf("a session of the disabled account opens /ops after the account was enabled again: %d", code)
	}
	if code, _ := e.page(t, carol, "/ops"); code != http.StatusOK {
		t.Errorf("another person's session was ended: %d", code)
	}
	again := client(t)
	if resp := e.login(t, again, "bob@example.com", password); resp.StatusCode != http.StatusSeeOther || strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("the owner signing in again = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := e.page(t, again, "/ops"); code != http.StatusOK {
		t.Errorf("the owner's new session = %d", code)
	}
}
