package web_test

import (
	"net/http"
	"testing"
)

// TestARefusedSignInKeepsOnlyAnEmailThatShowsAsItself: anyone can post the sign-in form, and
// each wrong password is an audit row that on-call and admins read on /audit. An "email"
// that parses as an address but holds a right-to-left override, an invisible character or
// Cyrillic letters passing for Latin would show them another address than was tried, so
// such a row names no address at all; a plain address tried is named.
func TestARefusedSignInKeepsOnlyAnEmailThatShowsAsItself(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	e := start(t, tw, h)
	for i, email := range append([]string{"nobody@example.com"}, disguisedEmails...) {
		from := "203.0.113." + itoa(int64(i+1)) + ":4000"
		wantLogin(t, "a wrong password for "+email, loginFrom(t, h, from, email, "not the password"), http.StatusUnauthorized, "")
	}
	rows := auditRows(t, e, "login.failed")
	if len(rows) != 1+len(disguisedEmails) {
		t.Fatalf("%d login.failed rows for %d wrong passwords", len(rows), 1+len(disguisedEmails))
	}
	named := 0
	for _, r := range rows {
		switch r.EntityID {
		case "nobody@example.com":
			named++
		case "(not an email address)":
		default:
			t.Errorf("a refused sign-in is recorded under %+q", r.EntityID)
		}
	}
	if named != 1 {
		t.Errorf("the plain address tried is named in %d rows, want 1", named)
	}
}
