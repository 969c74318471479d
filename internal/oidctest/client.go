package oidctest

import (
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is the one relying party: a confidential web client using the code flow.
type client struct {
	id, secret, redirect string
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return []string{c.redirect} }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }

// LoginURL is the provider's own sign-in step for an auth request.
func (c *client) LoginURL(id string) string           { return "/signin?id=" + id }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return 5 * time.Minute }

// DevMode lets the redirect URL be plain http on loopback.
func (c *client) DevMode() bool { return true }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(string) bool { return false }

// IDTokenUserinfoClaimsAssertion puts the email and groups in the ID token, as Settle reads
// them there.
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }
