package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/oidctest"
	"github.com/settle-dev/settle/web/sso"
)

// TestSSORefusesUnconfirmedEmail: an ID token whose email address the provider did not
// confirm (email_verified false, the string "false", or no email_verified at all) signs
// nobody in, whatever groups it names: the person gets a page saying their provider did
// not confirm the address, no user is created, and the refusal is audited with the issuer,
// the subject and the address claimed. Confirmed by the provider (true, or the string
// "true" some providers send), the same address signs in.
func TestSSORefusesUnconfirmedEmail(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t, false)
	for _, c := range []struct {
		name     string
		verified oidctest.Verified
		claims   map[string]any
	}{
		{"false", oidctest.VerifiedFalse, nil},
		{"absent", oidctest.VerifiedAbsent, nil},
		{"the string false", oidctest.VerifiedAbsent, map[string]any{"email_verified": "false"}},
	} {
		e.idp.AddPerson(oidctest.Person{Username: "mallory", Subject: "sub-mallory", Email: "admin@corp.example",
			Groups: []string{"settle-admins"}, EmailVerified: c.verified, Claims: c.claims})
		cl := client(t)
		resp, body := e.signInOverHTTP(t, cl, "/ops", "mallory")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `data-testid="error-message"`) ||
			!strings.Contains(body, "did not confirm") || !strings.Contains(body, "admin@corp.example") {
			t.Fatalf("email_verified %s: the callback answered %d %s\n%s", c.name, resp.StatusCode, resp.Header.Get("Location"), body)
		}
		if u := e.userByEmail(t, "admin@corp.example"); u != nil {
			t.Fatalf("email_verified %s: an unconfirmed address made a user: %+v", c.name, u)
		}
		if e.signedIn(t, cl) {
			t.Fatalf("email_verified %s: the person is signed in", c.name)
		}
	}
	rows := e.auditRows(t, "login.refused")
	if len(rows) != 3 {
		t.Fatalf("%d login.refused rows for three refusals: %+v", len(rows), rows)
	}
	for _, r := range rows {
		after := jsonOf(t, r.After)
		if r.Actor != "oidc:"+e.idp.Issuer || r.EntityID != "sub-mallory" || after["reason"] != "email_not_verified" ||
			after["issuer"] != e.idp.Issuer || after["subject"] != "sub-mallory" || after["claimed_email"] != "admin@corp.example" {
			t.Fatalf("refusal recorded as %s %s %s %v", r.Actor, r.Action, r.EntityID, after)
		}
	}

	e.idp.AddPerson(oidctest.Person{Username: "mallory", Subject: "sub-mallory", Email: "admin@corp.example", Groups: []string{"settle-admins"}})
	e.idp.AddPerson(oidctest.Person{Username: "cora", Subject: "sub-cora", Email: "cora@corp.example", Groups: []string{"settle-support"},
		EmailVerified: oidctest.VerifiedAbsent, Claims: map[string]any{"email_verified": "true"}})
	for _, who := range []string{"mallory", "cora"} {
		cl := client(t)
		if resp, body := e.signInOverHTTP(t, cl, "/ops", who); resp.StatusCode != http.StatusSeeOther || !e.signedIn(t, cl) {
			t.Fatalf("%s with a confirmed address: %d\n%s", who, resp.StatusCode, body)
		}
	}
	if e.userByEmail(t, "admin@corp.example") == nil || e.userByEmail(t, "cora@corp.example") == nil {
		t.Fatal("confirmed addresses made no users")
	}
}

// TestSSOTrustedEmailClaim: for a provider that sends no email_verified, the claim the
// deployment trusts (here upn) gives the address; without it, an unconfirmed email claim is
// refused as before, and a token with no address at all is refused saying so, audited.
func TestSSOTrustedEmailClaim(t *testing.T) {
	t.Parallel()
	e := newSSOEnvWith(t, false, func(c *sso.Config) { c.TrustedEmailClaim = "upn" })
	e.idp.AddPerson(oidctest.Person{Username: "ula", Subject: "sub-ula", Groups: []string{"settle-support"},
		EmailVerified: oidctest.VerifiedAbsent, Claims: map[string]any{"upn": "ula@corp.example"}})
	e.idp.AddPerson(oidctest.Person{Username: "ned", Subject: "sub-ned", Email: "ned@corp.example", Groups: []string{"settle-support"},
		EmailVerified: oidctest.VerifiedAbsent})
	e.idp.AddPerson(oidctest.Person{Username: "nia", Subject: "sub-nia", Groups: []string{"settle-support"}, EmailVerified: oidctest.VerifiedAbsent})

	c := client(t)
	if resp, body := e.signInOverHTTP(t, c, "/ops", "ula"); resp.StatusCode != http.StatusSeeOther || !e.signedIn(t, c) {
		t.Fatalf("ula, with the trusted claim: %d\n%s", resp.StatusCode, body)
	}
	if u := e.userByEmail(t, "ula@corp.example"); u == nil {
		t.Fatal("the trusted claim's address made no user")
	}
	for who, want := range map[string]string{"ned": "did not confirm that ned@corp.example", "nia": "no confirmed email address"} {
		c := client(t)
		if resp, body := e.signInOverHTTP(t, c, "/ops", who); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
			t.Fatalf("%s: %d, want 403 saying %q\n%s", who, resp.StatusCode, want, body)
		}
	}
	reasons := map[string]any{}
	for _, r := range e.auditRows(t, "login.refused") {
		reasons[r.EntityID] = jsonOf(t, r.After)["reason"]
	}
	if len(reasons) != 2 || reasons["sub-ned"] != "email_not_verified" || reasons["sub-nia"] != "no_email" {
		t.Fatalf("refusals audited as %v", reasons)
	}
}
