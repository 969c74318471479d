package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// TokenAdmin lists, issues and revokes API tokens; every change is in the audit log.
type TokenAdmin interface {
	Tokens(ctx context.Context) ([]desk.APIToken, error)
	IssueToken(ctx context.Context, tenant, name, actor string, now time.Time) (string, error)
	RevokeToken(ctx context.Context, id int64, actor string, now time.Time) (desk.APIToken, error)
}

func (s *Server) handleTokens(w http.ResponseWriter, r *http.Request) {
	s.renderTokens(w, r, http.StatusOK, views.TokensPage{Flash: s.popFlash(r.Context()).view()})
}

func (s *Server) renderTokens(w http.ResponseWriter, r *http.Request, status int, m views.TokensPage) {
	if s.TokenAdmin == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	tokens, err := s.TokenAdmin.Tokens(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m.Viewer = viewer(userFrom(ctx))
	for _, t := range tenants {
		m.Tenants = append(m.Tenants, t.Name)
	}
	for _, k := range tokens {
		row := views.TokenRow{ID: strconv.FormatInt(k.ID, 10), Tenant: k.Tenant, Name: k.Name, Prefix: k.Prefix, Created: formatTime(k.CreatedAt)}
		if k.RevokedAt != nil {
			row.Revoked = formatTime(*k.RevokedAt)
		}
		row.LastUsed = "never"
		if k.LastUsedAt != nil {
			row.LastUsed = formatTime(*k.LastUsedAt)
		}
		m.Tokens = append(m.Tokens, row)
	}
	s.render(w, r, status, views.Tokens(m))
}

// handleIssueToken issues a token for a tenant, creating the tenant if it is new, and
// shows it on the page it answers with: there is no redirect, because the token must not
// pass through the session store, and the page is not cached.
func (s *Server) handleIssueToken(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.TokenAdmin != nil) {
		return
	}
	ctx := r.Context()
	tenantName, name := strings.TrimSpace(r.PostForm.Get("tenant")), strings.TrimSpace(r.PostForm.Get("name"))
	token, err := s.TokenAdmin.IssueToken(ctx, tenantName, name, actor(r), s.Clock.Now())
	if ops.ErrorCode(err) == ops.EINVALID {
		s.renderTokens(w, r, http.StatusUnprocessableEntity, views.TokensPage{
			Flash: views.Flash{Kind: "error", Message: ops.ErrorMessage(err)}, FormTenant: tenantName, FormName: name})
		return
	} else if err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.renderTokens(w, r, http.StatusOK, views.TokensPage{
		Flash:  views.Flash{Kind: "ok", Message: fmt.Sprintf("Issued a token for %s.", tenantName)},
		Issued: &views.IssuedToken{Tenant: tenantName, Name: name, Token: token}})
}

// handleRevokeToken revokes a token. This process forgets its cached tokens at once;
// other replicas refuse the token when their cache entry ends (TokenCache.TTL).
func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	if s.TokenAdmin == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "No such API token."))
		return
	}
	k, err := s.TokenAdmin.RevokeToken(ctx, id, actor(r), s.Clock.Now())
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if c, ok := s.Accounts.(*TokenCache); ok {
		c.Forget()
	}
	s.putFlash(ctx, flashMsg{Kind: "ok", Message: fmt.Sprintf("Revoked %s… of %s.", k.Prefix, k.Tenant)})
	http.Redirect(w, r, "/admin/tokens", http.StatusSeeOther)
}
