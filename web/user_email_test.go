package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/ops/desk"
)

// disguisedEmails are addresses net/mail takes that would not show other people who they
// are: a right-to-left override that reverses what follows it, invisible characters, a C1
// control, a line separator, a Cyrillic letter among Latin ones, and fullwidth letters,
// each passing for admin@example.com or near it.
var disguisedEmails = []string{
	"moc.elpmaxe@nimda\u202e@evil.example",
	"ad\u202emin@example.com",
	"\u200badmin@example.com",
	"admin\u2060@example.com",
	"admin@example.com\u200b",
	"a\u0085dmin@example.com",
	"ad\u2028min@example.com",
	"\u0430dmin@example.com",
	"admin@ex\u0430mple.com",
	"\uff41dmin@example.com",
}

// TestAccountEmailsShowAsWhatTheyAre: an account's email is how other people see its holder
// on the dashboard, in approvals and in the audit log, so an address holding characters that
// do not show as themselves (bidi overrides, invisible or control characters, letters of
// another script passing for Latin ones) is refused, from an admin's form and from an
// identity provider alike, and no account is made; plain addresses, international ones
// written in one script included, are taken.
func TestAccountEmailsShowAsWhatTheyAre(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	root := e.signIn(t, "root@example.com", desk.RoleAdmin)
	for _, email := range disguisedEmails {
		resp, err := root.PostForm(e.url+"/admin/users", url.Values{"email": {email}, "password": {password}, "role": {"admin"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("adding %+q answered %d, want 422", email, resp.StatusCode)
		}
	}
	for _, email := range []string{"josé@example.com", "олга@пример.рф", "o.brien+settle@corp.example"} {
		resp := e.post(t, root, "/admin/users", url.Values{"email": {email}, "password": {password}, "role": {"support"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("adding %+q answered %d, want 303", email, resp.StatusCode)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM users`); n != 4 {
		t.Errorf("%d users after adding 3 plain addresses beside root's", n)
	}

	sso := newSSOEnv(t, false)
	for i, email := range disguisedEmails {
		who := "p" + itoa(int64(i))
		sso.idp.AddPerson(oidctest.Person{Username: who, Subject: "sub-" + who, Email: email, Groups: []string{"settle-admins"}})
		cl := client(t)
		resp, body := sso.signInOverHTTP(t, cl, "/ops", who)
		if resp.StatusCode == http.StatusSeeOther || sso.signedIn(t, cl) || !strings.Contains(body, `data-testid="error-message"`) {
			t.Errorf("signing in as %+q answered %d %s", email, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	var n int
	if err := sso.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM users`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d users (%v) after signing in with disguised addresses only", n, err)
	}
}

// TestSSORefusalsRecordDisguisedEmailsEscaped: a person of the identity provider whose
// address does not show as itself, confirmed or not (an unconfirmed one is often theirs to
// type), is refused, and the login.refused row on /audit names them by their subject and
// keeps the address escaped, so the row shows the people reading it what was sent.
func TestSSORefusalsRecordDisguisedEmailsEscaped(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	const email = "ad\u202emin@corp.example"
	e.idp.AddPerson(oidctest.Person{Username: "conf", Subject: "sub-conf", Email: email, Groups: []string{"settle-admins"}})
	e.idp.AddPerson(oidctest.Person{Username: "unconf", Subject: "sub-unconf", Email: email, Groups: []string{"settle-admins"},
		EmailVerified: oidctest.VerifiedFalse})
	for _, who := range []string{"conf", "unconf"} {
		cl := client(t)
		if resp, _ := e.signInOverHTTP(t, cl, "/ops", who); resp.StatusCode == http.StatusSeeOther || e.signedIn(t, cl) {
			t.Fatalf("%s signed in with %+q", who, email)
		}
	}
	rows := e.auditRows(t, "login.refused")
	if len(rows) != 2 {
		t.Fatalf("%d login.refused rows, want 2", len(rows))
	}
	for _, r := range rows {
		if r.EntityID != "sub-conf" && r.EntityID != "sub-unconf" {
			t.Errorf("refusal recorded under %+q, want the subject", r.EntityID)
		}
		after := jsonOf(t, r.After)
		for _, k := range []string{"email", "claimed_email"} {
			if v, _ := after[k].(string); strings.ContainsRune(v, '\u202e') {
				t.Errorf("refusal keeps %s %+q unescaped", k, v)
			}
		}
		if after["email"] != `"ad\u202emin@corp.example"` && after["claimed_email"] != `"ad\u202emin@corp.example"` {
			t.Errorf("refusal keeps neither address escaped: %s", r.After)
		}
	}
}
