package sso

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// Reasons of Finish's refusals, for the one table from errors to HTTP statuses.
const (
	// ReasonCallback: the callback is not one this browser's sign-in may accept (no sign-in
	// in progress, a used or expired one, a state or nonce that does not match, the
	// provider's refusal, a code it will not exchange).
	ReasonCallback = "sso_callback"
	// ReasonProvider: the provider could not be reached or answered something unusable.
	ReasonProvider = "sso_provider"
)

func refused(format string, args ...any) error {
	return &ops.Error{Code: ops.EUNAUTHORIZED, Reason: ReasonCallback, Message: fmt.Sprintf(format, args...)}
}

// Finish checks the callback against the flow kept since Begin, exchanges its code with the
// verifier, and verifies the ID token (signature, issuer, audience, expiry, nonce). The
// caller must have removed the flow from the session already, so that it serves once.
func (p *Provider) Finish(ctx context.Context, f Flow, now time.Time, q url.Values) (*Person, error) {
	code, state, idpErr := callbackQuery(q)
	switch {
	case f.State == "":
		return nil, refused("This sign-in link was already used, or was not started in this browser. Start again from the sign-in page.")
	case !now.Before(f.Expires):
		return nil, refused("This sign-in took longer than %s. Start again from the sign-in page.", FlowLifetime)
	case idpErr != "":
		return nil, refused("%s did not sign you in (%s). Start again from the sign-in page, or ask its admin.", p.cfg.Name, idpErr)
	case subtle.ConstantTimeCompare([]byte(state), []byte(f.State)) != 1:
		return nil, refused("This sign-in answer does not belong to the sign-in this browser started. Start again from the sign-in page.")
	case code == "":
		return nil, refused("%s sent no sign-in code. Start again from the sign-in page.", p.cfg.Name)
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, p.cfg.HTTPClient), providerTimeout)
	defer cancel()
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
		return nil, &ops.Error{Code: ops.EUNAUTHORIZED, Reason: ReasonCallback, Err: err,
			Message: fmt.Sprintf("%s refused this sign-in code (%s); it may have been used already. Start again from the sign-in page.", p.cfg.Name, re.ErrorCode)}
	} else if err != nil {
		return nil, providerErr(err, "%s could not be reached to finish the sign-in. Try again in a moment.", p.cfg.Name)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, providerErr(errors.New("no id_token"), "%s answered without an ID token; is the client set up for OpenID Connect?", p.cfg.Name)
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, providerErr(err, "%s's ID token could not be verified. Start again from the sign-in page.", p.cfg.Name)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return nil, refused("The ID token was not issued for this sign-in. Start again from the sign-in page.")
	}
	return p.person(idt)
}

func providerErr(err error, format string, args ...any) error {
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonProvider, Message: fmt.Sprintf(format, args...), Err: err}
}

// person reads who signed in from a verified ID token. Their email is the email claim when
// the provider says it confirmed the address, else the trusted claim's when one is
// configured: an address a person may type into their profile at the provider unchecked
// must not become their Settle identity. The groups are the role claim's value, one string
// or a list of them.
func (p *Provider) person(idt *oidc.IDToken) (*Person, error) {
	var c map[string]any
	if err := idt.Claims(&c); err != nil {
		return nil, providerErr(err, "%s's ID token could not be read.", p.cfg.Name)
	}
	out := &Person{Identity: desk.ExternalIdentity{Issuer: idt.Issuer, Subject: idt.Subject},
		EmailVerified: c["email_verified"], Groups: stringsOf(c[p.cfg.RoleClaim])}
	email, _ := c["email"].(string)
	trusted := ""
	if p.cfg.TrustedEmailClaim != "" {
		trusted, _ = c[p.cfg.TrustedEmailClaim].(string)
	}
	switch {
	case email != "" && confirmed(out.EmailVerified):
		out.Identity.Email = email
	case trusted != "":
		out.Identity.Email = trusted
	default:
		out.UnconfirmedEmail = email
	}
	return out, nil
}

// confirmed reads email_verified: a JSON true, or the string "true" that some providers
// (Amazon Cognito) send instead.
func confirmed(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
