// Package oidctest runs a real OpenID Connect provider on loopback for tests: the protocol
// is zitadel's op package, this package only keeps its state in memory (people, one
// client, auth requests, keys) and renders the provider's sign-in step, a form asking for
// a username. Nothing outside tests imports it.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Person is someone who can sign in at the provider.
type Person struct {
	Username string
	Subject  string
	Email    string
	// Groups is what the provider's "groups" claim says of them.
	Groups []string
	// EmailVerified is what the ID token's email_verified claim says of Email. The zero
	// value, VerifiedTrue, is what most providers send for an address they checked.
	EmailVerified Verified
	// Claims are more claims of the ID token, e.g. upn; they are sent as given.
	Claims map[string]any
}

// Verified is what the provider says of a person's email in the email_verified claim.
type Verified int

const (
	// VerifiedTrue sends email_verified=true.
	VerifiedTrue Verified = iota
	// VerifiedFalse sends email_verified=false: the provider never checked the address.
	VerifiedFalse
	// VerifiedAbsent leaves email_verified out, as providers that never check addresses do.
	VerifiedAbsent
)

// Provider is a running OpenID Connect provider.
type Provider struct {
	// Issuer is the provider's URL (http://127.0.0.1:port).
	Issuer       string
	ClientID     string
	ClientSecret string
	store        *storage
}

// Start runs a provider on 127.0.0.1 until the test ends, with one confidential client
// allowed to redirect to redirectURL.
func Start(t *testing.T, redirectURL string) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oidctest: listen: %v", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("oidctest: signing key: %v", err)
	}
	p := &Provider{Issuer: "http://" + ln.Addr().String(), ClientID: "settle", ClientSecret: rand.Text()}
	p.store = newStorage(key, &client{id: p.ClientID, secret: p.ClientSecret, redirect: redirectURL})
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	prov, err := op.NewOpenIDProvider(p.Issuer, &op.Config{CryptoKey: cryptoKey, CodeMethodS256: true, AuthMethodPost: true},
		p.store, op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("oidctest: provider: %v", err)
	}
	r := chi.NewRouter()
	callback := op.AuthCallbackURL(prov)
	r.Get("/signin", p.store.signinPage)
	r.With(op.NewIssuerInterceptor(prov.IssuerFromRequest).Handler).Post("/signin", func(w http.ResponseWriter, r *http.Request) {
		id := r.PostFormValue("id")
		if err := p.store.signIn(id, r.PostFormValue("username")); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			_ = signinTmpl.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	})
	r.Mount("/", prov)
	srv := &http.Server{Handler: r}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// AddPerson lets someone sign in, or changes what the provider says of them.
func (p *Provider) AddPerson(who Person) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.people[who.Username] = who
}

// ExchangedCodes counts the codes the token endpoint took, refused ones not included.
func (p *Provider) ExchangedCodes() int {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.exchanged
}

var signinTmpl = template.Must(template.New("signin").Parse(`<!doctype html>
<title>Test provider</title>
<h1>Test provider</h1>
{{if .Error}}<p data-testid="idp-error">{{.Error}}</p>{{end}}
<form method="post" action="/signin" data-testid="idp-form">
<input type="hidden" name="id" value="{{.ID}}">
<label>Username <input name="username" data-testid="idp-username"></label>
<button type="submit" data-testid="idp-submit">Continue</button>
</form>`))

func (s *storage) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = signinTmpl.Execute(w, map[string]string{"ID": r.URL.Query().Get("id")})
}

func (s *storage) signIn(id, username string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	who, ok := s.people[username]
	if !ok {
		return fmt.Errorf("no person %q", username)
	}
	ar, ok := s.requests[id]
	if !ok {
		return fmt.Errorf("no sign-in %q", id)
	}
	ar.subject, ar.done = who.Subject, true
	return nil
}
