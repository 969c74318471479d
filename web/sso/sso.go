// Package sso signs people in to the dashboard through an OpenID Connect provider with the
// authorization code flow: PKCE (S256), state and nonce, all checked here, kept sealed in
// the person's browser between the two legs (FlowSealer), and used once.
package sso

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/settle-dev/settle/ops/desk"
)

// FlowLifetime is how long a person has at the provider between leaving Settle and coming
// back; a callback later than that is refused and they start again.
const FlowLifetime = 10 * time.Minute

// providerTimeout bounds each call Settle makes to the provider: discovery, the code
// exchange and fetching its keys.
const providerTimeout = 15 * time.Second

// Config is how Settle is registered at the provider.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is read from it.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is Settle's callback, /login/oidc/callback, as registered at the provider.
	RedirectURL string
	// Name is what the sign-in button calls the provider.
	Name string
	// RoleClaim is the ID token claim naming the person's groups (or roles).
	RoleClaim string
	// Roles maps the claim's values to Settle roles.
	Roles desk.RoleMap
	// TrustedEmailClaim, when set, is an ID token claim whose address Settle takes as
	// confirmed when the email claim is not, for a provider that sends no email_verified
	// but manages its people's addresses itself (e.g. preferred_username at Entra ID).
	// Without it, only an email claim with email_verified true is taken.
	TrustedEmailClaim string
	// HTTPClient reaches the provider; nil is a client of its own.
	HTTPClient *http.Client
}

// Provider is one configured identity provider.
type Provider struct {
	cfg      Config
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// New reads the provider's discovery document, so a wrong issuer or an unreachable provider
// stops the server at start rather than the first person who signs in.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: providerTimeout}
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, cfg.HTTPClient), providerTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("read the discovery document of %s: %w", cfg.Issuer, err)
	}
	return &Provider{
		cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"}},
		verifier: p.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
	}, nil
}

// Name is what the sign-in button calls the provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Issuer is the provider's issuer URL, as the ID tokens carry it.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// RoleFor is the Settle role of a person in groups, false when none of them is mapped.
func (p *Provider) RoleFor(groups []string) (desk.Role, bool) { return p.cfg.Roles.RoleFor(groups) }

// Flow is one sign-in in progress: what the callback must match, and where to go after.
// It is kept sealed in the browser (FlowSealer) until the callback.
type Flow struct {
	State    string    `json:"state"`
	Verifier string    `json:"verifier"`
	Nonce    string    `json:"nonce"`
	Next     string    `json:"next"`
	Expires  time.Time `json:"expires"`
}

// Begin starts a sign-in: the flow to keep until the callback, and the provider's URL to
// send the browser to.
func (p *Provider) Begin(now time.Time, next string) (Flow, string) {
	f := Flow{State: random(), Verifier: oauth2.GenerateVerifier(), Nonce: random(), Next: next, Expires: now.Add(FlowLifetime)}
	return f, p.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce))
}

// random is 32 bytes from the system's source, which never fails (crypto/rand panics
// rather than return short).
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Person is who the provider says signed in.
type Person struct {
	// Identity's Email is an address the provider confirmed (or the trusted claim's), empty
	// when there is none.
	Identity desk.ExternalIdentity
	// UnconfirmedEmail is the email claim when it was not taken as confirmed: kept to tell the
	// person and the audit log which address was refused.
	UnconfirmedEmail string
	// EmailVerified is the email_verified claim as the provider sent it, nil when absent.
	EmailVerified any
	// Groups are the values of the role claim.
	Groups []string
}

// callbackQuery is the part of the callback's query Finish reads.
func callbackQuery(q url.Values) (code, state, idpErr string) {
	if e := q.Get("error"); e != "" {
		idpErr = e
		if d := q.Get("error_description"); d != "" {
			idpErr += ": " + d
		}
		if len(idpErr) > 300 {
			idpErr = idpErr[:300] + "…"
		}
	}
	return q.Get("code"), q.Get("state"), idpErr
}
