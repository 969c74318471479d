package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestHostileSignInsAreWrongPasswords: anyone may post the sign-in form, so what a hostile
// client puts in its email (bytes that are not UTF-8, a NUL, a control character, a huge
// paste) is answered as any unknown email is: 401 with the sign-in page and its sentence,
// counted by the throttle, never a server error.
func TestHostileSignInsAreWrongPasswords(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	start(t, tw, h)
	for i, email := range []string{"\xff\xfe@example.com", "a\x00b@example.com", "a\x1b[2J@example.com", strings.Repeat("a", 70000) + "@example.com", "\xed\xa0\x80"} {
		rec := loginFrom(t, h, "198.51.100."+itoa(int64(i+1))+":1", email, "not the password")
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `data-testid="login-error"`) {
			t.Errorf("sign-in as %.40q = %d\n%.300s", email, rec.Code, rec.Body)
		}
	}
}
