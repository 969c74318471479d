package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
	"github.com/settle-dev/settle/web/sso"
)

// SSODeps is what signing in through an OpenID Connect provider needs.
type SSODeps struct {
	// SSO is the identity provider; nil leaves single sign-on off.
	SSO *sso.Provider
	// SSOUsers creates and updates the provider's people as they sign in.
	SSOUsers desk.ExternalUsers
	// PasswordLoginOff refuses password sign-ins: the sign-in page offers only the provider.
	PasswordLoginOff bool
	// SSOFlows seals the sign-ins in progress into the browser's cookie; every server of a
	// deployment needs the same key (serve keeps it in the database). Nil seals with a key
	// of this process only, so a sign-in must finish on the server that started it.
	SSOFlows *sso.FlowSealer
}

// ssoFlowCookie holds the sign-in in progress at the provider, sealed, from the start to
// the callback: nothing is stored on the server for a visitor until the provider has
// answered, however many times anyone opens /login/oidc.
const ssoFlowCookie = "settle_sso_flow"

// maxFlowNext bounds the page a flow returns to, so the sealed flow stays well within the
// 4 KB browsers keep of a cookie; a longer one returns to /ops.
const maxFlowNext = 2000

func (s *Server) mountSSO(r chi.Router) {
	if s.SSO == nil {
		return
	}
	if s.SSOFlows == nil {
		s.SSOFlows = sso.NewLocalFlowSealer()
	}
	r.Get("/login/oidc", s.handleSSOStart)
	r.Get("/login/oidc/callback", s.handleSSOCallback)
}

// handleSSOStart sends the browser to the provider with the flow in its cookie. A second
// start in the same browser replaces the first, whose callback is then refused.
func (s *Server) handleSSOStart(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r, r.URL.Query().Get("next"))
	if len(next) > maxFlowNext {
		next = home
	}
	f, to := s.SSO.Begin(s.Clock.Now(), next)
	http.SetCookie(w, s.flowCookie(s.SSOFlows.Seal(f), int(sso.FlowLifetime/time.Second)))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// flowCookie is the cookie of the sign-in in progress, sent only to the sign-in's own
// routes; a negative maxAge deletes it.
func (s *Server) flowCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: ssoFlowCookie, Value: value, Path: "/login/oidc", MaxAge: maxAge,
		HttpOnly: true, Secure: s.Sessions.Cookie.Secure, SameSite: http.SameSiteLaxMode}
}

// handleSSOCallback finishes a sign-in. The browser is told to drop the flow before
// anything is checked, so a callback URL works once, whatever it brings; the code it
// carries is spent at the provider, so the flow cannot serve again from a copy either.
func (s *Server) handleSSOCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var f sso.Flow
	if c, err := r.Cookie(ssoFlowCookie); err == nil {
		f = s.SSOFlows.Open(c.Value) // a value Settle did not seal is no flow, refused below
	}
	http.SetCookie(w, s.flowCookie("", -1))
	p, err := s.SSO.Finish(ctx, f, s.Clock.Now(), r.URL.Query())
	if err != nil {
		s.Error(w, r, err)
		return
	}
	u, err := s.ssoUser(ctx, p)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.signIn(ctx, u); err != nil {
		s.Error(w, r, err)
		return
	}
	s.Logger.InfoContext(ctx, "signed in", "user_id", u.ID, "role", u.Role, "issuer", s.SSO.Issuer())
	http.Redirect(w, r, safeNext(r, f.Next), http.StatusSeeOther)
}

// ssoUser maps the person's groups to a role and signs them in as their user. A refusal
// that names the person (an email address the provider did not confirm, no mapped group,
// a disabled account, an email taken by another user) is audited as login.refused.
func (s *Server) ssoUser(ctx context.Context, p *sso.Person) (*desk.User, error) {
	if p.Identity.Email == "" {
		if p.UnconfirmedEmail != "" {
			s.auditSSORefusal(ctx, p, "email_not_verified")
			return nil, ops.Errorf(ops.EFORBIDDEN, "%s signed you in, but did not confirm that %s is your email address, so Settle cannot sign you in with it. Confirm the address at %s (or ask its admin to), then sign in again.",
				s.SSO.Name(), p.UnconfirmedEmail, s.SSO.Name())
		}
		s.auditSSORefusal(ctx, p, "no_email")
		return nil, ops.Errorf(ops.EFORBIDDEN, "%s signed you in, but sent Settle no confirmed email address, which Settle needs to know who you are. Ask its admin to release your verified email address to Settle.",
			s.SSO.Name())
	}
	role, ok := s.SSO.RoleFor(p.Groups)
	if !ok {
		s.auditSSORefusal(ctx, p, "no_mapped_group")
		return nil, ops.Errorf(ops.EFORBIDDEN, "%s signed you in as %s, but none of your groups there gives a Settle role. Ask your admin to add you to one of the groups Settle maps.",
			s.SSO.Name(), personName(p))
	}
	in, err := s.SSOUsers.SignInExternal(ctx, p.Identity, role, s.Clock.Now())
	switch ops.ErrorCode(err) {
	case "":
	case ops.EFORBIDDEN, ops.ECONFLICT, ops.EINVALID:
		s.auditSSORefusal(ctx, p, ops.ErrorCode(err))
		return nil, err
	default:
		return nil, err
	}
	if in.Created || in.PreviousRole != "" {
		s.Logger.InfoContext(ctx, "user of the identity provider", "user_id", in.User.ID, "created", in.Created,
			"role", in.User.Role, "previous_role", in.PreviousRole)
	}
	return in.User, nil
}

// auditedEmail is an address the provider sent as the audit log keeps it: as sent when it
// shows as itself, else quoted with its hidden characters escaped (desk.CheckEmailShows),
// so the people reading the log see what was sent.
func auditedEmail(email string) string {
	if email == "" || desk.CheckEmailShows(email) == nil {
		return email
	}
	return strconv.QuoteToASCII(email)
}

func personName(p *sso.Person) string {
	if p.Identity.Email != "" {
		return p.Identity.Email
	}
	return p.Identity.Subject
}

// auditSSORefusal records who was refused and what the provider said of them. A failure to
// record is logged: the person refused has nothing to do about it.
func (s *Server) auditSSORefusal(ctx context.Context, p *sso.Person, reason string) {
	if s.LoginAudit == nil {
		return
	}
	after := map[string]any{"issuer": p.Identity.Issuer, "subject": p.Identity.Subject,
		"email": auditedEmail(p.Identity.Email), "groups": p.Groups, "reason": reason}
	if p.Identity.Email == "" {
		after["claimed_email"], after["email_verified"] = auditedEmail(p.UnconfirmedEmail), p.EmailVerified
	}
	b, _ := json.Marshal(after)
	who := personName(p)
	if who != p.Identity.Subject && desk.CheckEmailShows(who) != nil {
		who = p.Identity.Subject
	}
	e := desk.AuditLogEntry{At: s.Clock.Now(), Actor: "oidc:" + p.Identity.Issuer, Action: "login.refused",
		Entity: "login", EntityID: who, After: b}
	if err := s.LoginAudit.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		s.Logger.WarnContext(ctx, "record a refused sign-in in the audit log", "action", e.Action, "err", err)
	}
}

// loginPage is the sign-in page's model with what this server offers.
func (s *Server) loginPage(next string) views.LoginPage {
	m := views.LoginPage{Next: next, PasswordOff: s.PasswordLoginOff}
	if s.SSO != nil {
		m.SSOName, m.SSOURL = s.SSO.Name(), "/login/oidc?next="+url.QueryEscape(next)
	}
	return m
}
