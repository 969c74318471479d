package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// DashboardDeps are the dependencies of the operator dashboard's pages. A nil field turns
// its pages into a "not configured" answer instead of a crash.
type DashboardDeps struct {
	// Desk performs lookups at the provider and closes operations (desk.Desk).
	Desk Desk
	// Timelines reads one operation with everything recorded about it.
	Timelines TimelineReader
	// SupportSearch finds operations by the references support is given.
	SupportSearch SupportSearcher
	// AuditLog reads the audit log.
	AuditLog AuditReader
	// UserAdmin lists and changes dashboard users.
	UserAdmin UserAdmin
	// TokenAdmin lists, issues and revokes API tokens.
	TokenAdmin TokenAdmin
	// Jobs lists the pipeline jobs that use an llm_job operation, for its detail page.
	JobViews JobViewer
	// BulkCap bounds how many operations one bulk lookup handles (default 200).
	BulkCap int
}

// Desk is what the dashboard's actions need from the domain.
type Desk interface {
	Lookup(ctx context.Context, opID, actor string) (desk.LookupOutcome, error)
	LookupMany(ctx context.Context, ids []string, actor string) desk.BulkOutcome
	CloseNotExecuted(ctx context.Context, id string, version int64, note, actor string) (desk.LookupOutcome, error)
	CloseManually(ctx context.Context, p desk.ManualClose) (*ops.Operation, error)
	// CheckManualFail says why a person may not close op as failed by hand now, or nil.
	CheckManualFail(op *ops.Operation, attempts []ops.Attempt, now time.Time) error
}

// mountDashboard adds the dashboard's pages; it runs inside the session group. Each
// group checks the role on the server, whatever the page offers.
func (s *Server) mountDashboard(r chi.Router) {
	support := s.forRole(r, desk.RoleSupport)
	support.Get("/ops/{id}", s.handleOpDetail)
	support.Get("/support", s.handleSupport)

	oncall := s.forRole(r, desk.RoleOncall)
	oncall.Post("/ops/lookup", s.handleBulkLookup)
	oncall.Post("/ops/{id}/lookup", s.handleLookup)
	oncall.Post("/ops/{id}/close", s.handleClose)
	oncall.Post("/ops/{id}/close-not-executed", s.handleCloseNotExecuted)
	oncall.Get("/audit", s.handleAudit)

	admin := s.forRole(r, desk.RoleAdmin)
	admin.Get("/admin/users", s.handleUsers)
	admin.Post("/admin/users", s.handleAddUser)
	admin.Post("/admin/users/{id}/role", s.handleUserRole)
	admin.Post("/admin/users/{id}/disable", s.handleUserDisable)
	admin.Post("/admin/users/{id}/enable", s.handleUserEnable)
	admin.Get("/admin/tokens", s.handleTokens)
	admin.Post("/admin/tokens", s.handleIssueToken)
	admin.Post("/admin/tokens/{id}/revoke", s.handleRevokeToken)
}

// forRole is r for routes that only signed-in people with at least role may use.
func (s *Server) forRole(r chi.Router, role desk.Role) chi.Router {
	return r.With(s.requireUser, s.requireRole(role))
}

// notConfigured answers pages whose dependency was not wired.
func (s *Server) notConfigured(w http.ResponseWriter, r *http.Request) {
	s.Error(w, r, ops.Errorf(ops.EUNAVAILABLE, "This part of the dashboard is not configured on this server."))
}

// readForm parses the posted form; when it cannot be read it answers 400 and returns false.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The form could not be read."))
		return false
	}
	return true
}

// formFor is readForm for a part of the dashboard that may not be configured on this server
// (configured false): that is answered first, and the form is left unread.
func (s *Server) formFor(w http.ResponseWriter, r *http.Request, configured bool) bool {
	if !configured {
		s.notConfigured(w, r)
		return false
	}
	return s.readForm(w, r)
}

// actor names the signed-in person in the ledger's audit rows.
func actor(r *http.Request) string { return userFrom(r.Context()).Email }

// sessionFlash is the session key of the one-time message after an action.
const sessionFlash = "flash"

// flashMsg is a message for the next page, kept in the session across the redirect that
// follows every action (post, redirect, get), so reloading never repeats the action.
type flashMsg struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Outcome and OpID are set for the result of a lookup on one operation.
	Outcome string `json:"outcome,omitempty"`
	OpID    string `json:"op,omitempty"`
}

func (s *Server) putFlash(ctx context.Context, f flashMsg) {
	b, _ := json.Marshal(f)
	s.Sessions.Put(ctx, sessionFlash, string(b))
}

func (s *Server) popFlash(ctx context.Context) flashMsg {
	var f flashMsg
	if v := s.Sessions.PopString(ctx, sessionFlash); v != "" {
		_ = json.Unmarshal([]byte(v), &f)
	}
	return f
}

func (f flashMsg) view() views.Flash { return views.Flash{Kind: f.Kind, Message: f.Message} }

// formatTime is how the dashboard writes a moment: UTC, to the second, so people in
// different time zones quote the same string in an incident channel.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
