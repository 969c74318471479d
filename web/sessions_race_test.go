package web_test

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// gatedBody is a form body that holds its bytes back until open is closed, so a request
// stays in flight, past its sign-in check, for as long as a test needs.
type gatedBody struct {
	open <-chan struct{}
	r    io.Reader
}

func (b *gatedBody) Read(p []byte) (int, error) {
	<-b.open
	return b.r.Read(p)
}

// slowPost starts a form post with c's cookies whose body is held back, and returns once
// the handler reads it, past the sign-in check; closing the returned gate sends the body,
// and the returned channel gives the post's outcome.
func slowPost(t *testing.T, c *http.Client, url string) (chan<- struct{}, <-chan error) {
	t.Helper()
	open, reading := make(chan struct{}), make(chan struct{})
	// The server asks for the body (100 Continue) only once the handler reads it.
	slow := &http.Client{Jar: c.Jar, Transport: &http.Transport{ExpectContinueTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := "note=slow"
	req, err := http.NewRequest(http.MethodPost, url, &gatedBody{open: open, r: strings.NewReader(form)})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Expect", "100-continue")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got100Continue: func() { close(reading) }}))
	done := make(chan error, 1)
	go func() {
		resp, err := slow.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-reading:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never read the slow request's body")
	}
	return open, done
}

// TestSigningOutStaysSignedOutWhileAnotherTabLoads: a person signs out in one tab while
// another tab of the same browser is loading a page (an auto-refresh, a form sent). The
// page that was loading ends after the sign-out; neither it nor anything after it finds the
// browser signed in again, so the next person at a shared computer finds the sign-in page.
func TestSigningOutStaysSignedOutWhileAnotherTabLoads(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	c := e.signIn(t, "bob@example.com", desk.RoleOncall)
	before := sessionCookie(t, e.env, c)

	open, done := slowPost(t, c, e.url+"/ops/00000000-0000-0000-0000-000000000000/close")
	if resp := e.post(t, c, "/logout", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out = %d", resp.StatusCode)
	}
	close(open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, _ := e.page(t, c, "/ops"); code != http.StatusSeeOther {
		t.Fatalf("after signing out, the browser opens /ops again: %d", code)
	}
	old := client(t)
	old.Jar = c.Jar
	u, _ := url.Parse(e.url)
	old.Jar.SetCookies(u, []*http.Cookie{{Name: "settle_session", Value: before}})
	if code, _ := e.page(t, old, "/ops"); code != http.StatusSeeOther {
		t.Fatalf("the session token of before the sign-out opens /ops: %d", code)
	}
}

// TestASessionInFlightWhenItsUserIsDisabledStaysEnded: whoever holds a taken session keeps
// one request of it in flight (a form whose body arrives slowly) while an admin disables the
// account. That request was let in before the disable; when it ends, it must not write the
// session back, or the session works again as soon as the account is enabled for its owner,
// which is what disabling was meant to prevent (docs/security.md, "Disabling a person
// signs them out for good").
func TestASessionInFlightWhenItsUserIsDisabledStaysEnded(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	root := e.signIn(t, "root@example.com", desk.RoleAdmin)
	taken := e.signIn(t, "bob@example.com", desk.RoleOncall)
	var bobID int64
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id FROM users WHERE email = 'bob@example.com'`).Scan(&bobID); err != nil {
		t.Fatal(err)
	}

	open, done := slowPost(t, taken, e.url+"/ops/00000000-0000-0000-0000-000000000000/close")
	e.post(t, root, "/admin/users/"+itoa(bobID)+"/disable", nil)
	close(open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Minute)
	e.post(t, root, "/admin/users/"+itoa(bobID)+"/enable", nil)

	if code, _ := e.page(t, taken, "/ops"); code != http.StatusSeeOther {
		t.Fatalf("the session of a request in flight at the disable opens /ops once the account is enabled again: %d", code)
	}
}
