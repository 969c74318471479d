package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/web"
	"github.com/settle-dev/settle/web/sso"
)

// ssoCallbackPath is the dashboard's route the provider sends people back to.
const ssoCallbackPath = "/login/oidc/callback"

// SSOConfig is single sign-on through an OpenID Connect provider (SETTLE_OIDC_*), and
// whether password sign-in stays on (SETTLE_PASSWORD_LOGIN).
type SSOConfig struct {
	// Provider is the provider's registration; its Issuer is empty when SSO is off.
	Provider sso.Config
	// PasswordLoginOff refuses password sign-ins; it needs a provider.
	PasswordLoginOff bool
}

// loadSSOEnv reads SETTLE_OIDC_* and SETTLE_PASSWORD_LOGIN. The client secret is never
// repeated in a message.
func loadSSOEnv(sc *SSOConfig, e environ) error {
	switch v := e.get(envPasswordLogin); v {
	case "", "on":
		sc.PasswordLoginOff = false
	case "off":
		sc.PasswordLoginOff = true
	default:
		return usagef("%s=%q: use on or off", envPasswordLogin.Name, v)
	}
	// The issuer is kept exactly as given: the discovery document must name the same one,
	// trailing slash included (some providers' issuers end with one).
	c := sso.Config{Issuer: e.get(envOIDCIssuer), ClientID: e.get(envOIDCClientID),
		ClientSecret: e.get(envOIDCClientSecret), RedirectURL: e.get(envOIDCRedirectURL),
		Name: e.get(envOIDCProviderName), RoleClaim: e.get(envOIDCRoleClaim),
		TrustedEmailClaim: e.get(envOIDCTrustedEmailClaim)}
	if c.Issuer == "" {
		for _, s := range []*setting{envOIDCClientID, envOIDCClientSecret, envOIDCRedirectURL, envOIDCRoles, envOIDCRoleClaim, envOIDCProviderName, envOIDCTrustedEmailClaim} {
			if e.get(s) != "" {
				return usagef("%s is set but %s is not; set it to the identity provider's issuer URL", s.Name, envOIDCIssuer.Name)
			}
		}
		if sc.PasswordLoginOff {
			return usagef("SETTLE_PASSWORD_LOGIN=off leaves no way to sign in: configure single sign-on with SETTLE_OIDC_ISSUER first")
		}
		sc.Provider = c
		return nil
	}
	iu, err := url.Parse(c.Issuer)
	if err != nil || iu.Host == "" || (iu.Scheme != "https" && !(iu.Scheme == "http" && loopback(iu.Hostname()))) {
		// Said without the value, as for every URL setting: a URL may hold a token.
		return usagef("SETTLE_OIDC_ISSUER holds a value that is not an https URL (plain http is accepted on loopback only)")
	}
	if c.ClientID == "" {
		// Said without the issuer, as for every URL setting: a URL may hold a token.
		return usagef("%s is not set; set it to the client id Settle is registered with at the identity provider", envOIDCClientID.Name)
	}
	if c.RedirectURL, err = redirectURL(c.RedirectURL, e.get(envExternalURL)); err != nil {
		return err
	}
	if c.Roles, err = desk.ParseRoleMap(e.get(envOIDCRoles)); err != nil {
		return usagef("SETTLE_OIDC_ROLES: %v; write group=role pairs, e.g. settle-admins=admin,settle-oncall=oncall", err)
	}
	if c.RoleClaim == "" {
		c.RoleClaim = "groups"
	}
	if strings.ContainsAny(c.TrustedEmailClaim, " \t,=") || c.TrustedEmailClaim == "email_verified" {
		return usagef("SETTLE_OIDC_TRUSTED_EMAIL_CLAIM=%q is not the name of one ID token claim holding an address, e.g. upn or preferred_username", c.TrustedEmailClaim)
	}
	if c.Name == "" {
		c.Name = iu.Hostname()
	}
	sc.Provider = c
	return nil
}

// redirectURL is SETTLE_OIDC_REDIRECT_URL, or the callback under SETTLE_EXTERNAL_URL.
func redirectURL(explicit, external string) (string, error) {
	if explicit == "" {
		if external == "" {
			return "", usagef("set SETTLE_OIDC_REDIRECT_URL (https://settle.example.com%s) or SETTLE_EXTERNAL_URL, so Settle knows the callback registered at the identity provider", ssoCallbackPath)
		}
		explicit = strings.TrimRight(external, "/") + ssoCallbackPath
	}
	u, err := url.Parse(explicit)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != ssoCallbackPath || u.RawQuery != "" {
		return "", usagef("SETTLE_OIDC_REDIRECT_URL must be Settle's address followed by %s", ssoCallbackPath)
	}
	return explicit, nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// ssoFlowKey names the key, kept in the database, that seals sign-ins in progress into the
// browser's cookie: every replica reads the same one, so a sign-in started on one finishes
// on any.
const ssoFlowKey = "sso_flow"

// ssoFlows is what seals sign-ins in progress, with the deployment's key from db.
func (p *Program) ssoFlows(ctx context.Context, db *pg.DB) (*sso.FlowSealer, error) {
	key, err := db.SecretKey(ctx, ssoFlowKey, sso.FlowKeySize, p.Clock.Now())
	if err != nil {
		return nil, err
	}
	return sso.NewFlowSealer(key)
}

// ssoDeps reads the provider's discovery document when single sign-on is configured, so a
// wrong or unreachable issuer stops serve at start with one line.
func (p *Program) ssoDeps(ctx context.Context) (web.SSODeps, error) {
	sc := p.Config.Web.SSO
	if sc.Provider.Issuer == "" {
		return web.SSODeps{}, nil
	}
	prov, err := sso.New(ctx, sc.Provider)
	if err != nil {
		return web.SSODeps{}, fmt.Errorf("SETTLE_OIDC_ISSUER: %w", err)
	}
	return web.SSODeps{SSO: prov, PasswordLoginOff: sc.PasswordLoginOff}, nil
}
