package main

// The settings of the people's side: alerts and where they go, single sign-on to the
// dashboard, and the four-eyes approvals of closes.

var (
	envAlertRules = define(sectionDashboard, setting{Name: "SETTLE_ALERT_RULES", Commands: []string{"serve", "demo", "alerts export"},
		Default: "built-in rules", Parses: "a YAML file",
		Short: "alert rules file (Prometheus-shaped YAML)",
		Doc: "alert rules file (Prometheus-shaped YAML, see `alerts/default_rules.yaml`); a mistake stops `serve` with " +
			"`file:line: reason`"})
	envAlertmanagerURL = define(sectionDashboard, setting{Name: "SETTLE_ALERTMANAGER_URL", Commands: []string{"serve", "demo", "alerts export"},
		Parses: "an http(s) URL",
		Short:  "Alertmanager base URL",
		Doc:    "Alertmanager base URL (v2 API): firing alerts re-sent every evaluation, resolved ones with `endsAt`", Secret: true})
	envAlertWebhookURLs = define(sectionDashboard, setting{Name: "SETTLE_ALERT_WEBHOOK_URLS", Commands: []string{"serve", "demo", "alerts export"},
		Parses: "comma-separated http(s) URLs",
		Short:  "comma-separated receivers of the Alertmanager v4 webhook payload",
		Doc:    "comma-separated URLs receiving the Alertmanager v4 webhook payload, for teams without Alertmanager", Secret: true})
	envExternalURL = define(sectionDashboard, setting{Name: "SETTLE_EXTERNAL_URL", Commands: []string{"serve", "demo", "alerts export"},
		Parses: "an http(s) URL",
		Short:  "where people reach Settle; alerts link to /alerts, single sign-on's callback is under it",
		Doc:    "where people reach Settle; alerts link to `/alerts`, and single sign-on's callback is `/login/oidc/callback` under it", Secret: true})
)

var (
	envOIDCIssuer = define(sectionDashboard, setting{Name: "SETTLE_OIDC_ISSUER", Commands: []string{"serve", "demo"},
		Parses: "an https URL (plain http on loopback only), kept exactly as given",
		Short:  "OpenID Connect provider's issuer URL: turns on single sign-on to the dashboard",
		Doc: "the OpenID Connect provider's issuer URL: turns on single sign-on to the dashboard (see [Single sign-on](sso.md)); " +
			"`serve` reads its discovery document at start and stops with one line when it cannot", Secret: true})
	envOIDCClientID = define(sectionDashboard, setting{Name: "SETTLE_OIDC_CLIENT_ID", Commands: []string{"serve", "demo"},
		Required: "required with an issuer", Parses: "text",
		Short: "Settle's client id at the provider",
		Doc:   "Settle's client id at the provider"})
	envOIDCClientSecret = define(sectionDashboard, setting{Name: "SETTLE_OIDC_CLIENT_SECRET", Commands: []string{"serve", "demo"},
		Parses: "text",
		Short:  "the client's secret; unset for a public client",
		Doc:    "the client's secret; leave it unset for a public client (PKCE protects the code either way)", Secret: true})
	envOIDCRedirectURL = define(sectionDashboard, setting{Name: "SETTLE_OIDC_REDIRECT_URL", Commands: []string{"serve", "demo"},
		Default: "`SETTLE_EXTERNAL_URL` + `/login/oidc/callback`", Parses: "Settle's http(s) address followed by `/login/oidc/callback`",
		Short: "the callback registered at the provider",
		Doc:   "the callback registered at the provider; it or `SETTLE_EXTERNAL_URL` is required with an issuer", Secret: true})
	envOIDCRoleClaim = define(sectionDashboard, setting{Name: "SETTLE_OIDC_ROLE_CLAIM", Commands: []string{"serve", "demo"},
		Default: "`groups`", Parses: "a claim name",
		Short: "ID token claim naming the person's groups",
		Doc:   "the ID token claim that names the person's groups (a string or a list of strings), e.g. `roles` for Entra ID app roles"})
	envOIDCRoles = define(sectionDashboard, setting{Name: "SETTLE_OIDC_ROLES", Commands: []string{"serve", "demo"},
		Required: "required with an issuer", Parses: "comma-separated `group=role`, roles `support`, `oncall`, `manager`, `admin`",
		Short: "groups to roles, e.g. settle-admins=admin,settle-oncall=oncall (the most powerful wins)",
		Doc: "claim values to roles, e.g. `settle-admins=admin,settle-oncall=oncall,settle-support=support`; a person in several " +
			"mapped groups gets the most powerful role, one in none is refused"})
	envOIDCProviderName = define(sectionDashboard, setting{Name: "SETTLE_OIDC_PROVIDER_NAME", Commands: []string{"serve", "demo"},
		Default: "the issuer's host", Parses: "text",
		Short: "what the sign-in button calls the provider",
		Doc:   "the provider's name on the sign-in button (\"Sign in with …\")"})
	envOIDCTrustedEmailClaim = define(sectionDashboard, setting{Name: "SETTLE_OIDC_TRUSTED_EMAIL_CLAIM", Commands: []string{"serve", "demo"},
		Parses: "a claim name other than `email_verified`",
		Short:  "ID token claim whose address is taken as confirmed when the provider sends no email_verified, e.g. preferred_username for Entra ID",
		Doc: "an ID token claim whose address is taken as confirmed when the provider sends no `email_verified`, e.g. " +
			"`preferred_username` for Entra ID; without it only an `email` with `email_verified` true signs in"})
	envPasswordLogin = define(sectionDashboard, setting{Name: "SETTLE_PASSWORD_LOGIN", Commands: []string{"serve", "demo"},
		Default: "`on`", Parses: "`on` or `off`",
		Short: "off leaves only single sign-on",
		Doc:   "`off`: the sign-in page offers only single sign-on and a password POST is refused (403); needs `SETTLE_OIDC_ISSUER`"})
)

var (
	envApprovalMinCents = define(sectionDashboard, setting{Name: "SETTLE_APPROVAL_MIN_CENTS", Commands: []string{"serve", "demo"},
		Default: "`off`", Parses: "a whole number of cents, `0` or more, or `off`",
		Short: "a person's close of this amount or more needs a second person",
		Doc: "four-eyes approvals (see [Four-eyes approvals](approvals.md)): a person's close by hand or as not executed of an " +
			"operation whose amount, in cents, is at least this needs a second person; `off` or unset: none by amount. A tenant's " +
			"own `settle tenant approvals` setting wins"})
	envApprovalNotExecuted = define(sectionDashboard, setting{Name: "SETTLE_APPROVAL_NOT_EXECUTED", Commands: []string{"serve", "demo"},
		Default: "`off`", Parses: "`on` or `off`",
		Short: "on: every close as not executed needs a second person",
		Doc:   "`on`: every close as not executed needs a second person, whatever the amount; per tenant too"})
	envApprovalTTL = define(sectionDashboard, setting{Name: "SETTLE_APPROVAL_TTL", Commands: []string{"serve", "demo"},
		Default: "`24h`", Parses: "a Go duration, from `1m` to `168h` (a week)",
		Short: "how long a proposed close may be approved",
		Doc: "how long a proposed close may be approved; after it, it reads as expired and can only be proposed again. More " +
			"than a week is refused: a proposal older than an on-call rotation rests on evidence that may no longer hold " +
			"(`TestApprovalTTLHasAnUpperLimit` (`cmd/settle/settings_limits_test.go`))"})
)
