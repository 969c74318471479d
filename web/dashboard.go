package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
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
	// FollowUps records and lists who waits to hear how an operation ends (desk.FollowUps).
	FollowUps FollowUpDesk
	// BulkCap bounds how many ticked operations one lookup handles (default 200).
	BulkCap int
	// Bulk runs lookups over everything a filter matches, in the background.
	Bulk BulkLookups
	// SavedViews keeps the named filters of the queues and reconciliation pages.
	SavedViews SavedViews
}

// Desk is what the dashboard's actions need from the domain.
type Desk interface {
	Lookup(ctx context.Context, opID, actor string) (desk.LookupOutcome, error)
	LookupMany(ctx context.Context, ids []string, actor string) desk.BulkOutcome
	CloseNotExecutedBy(ctx context.Context, p desk.NotExecutedClose) (desk.LookupOutcome, error)
	CloseManually(ctx context.Context, p desk.ManualClose) (desk.CloseOutcome, error)
	// Approve carries out an operation's proposed close as a second person (ops rule 13);
	// Reject ends the proposal without closing.
	Approve(ctx context.Context, dec desk.Decision) (desk.LookupOutcome, error)
	Reject(ctx context.Context, dec desk.Decision) (*ops.Proposal, error)
	// Proposal is an operation's newest close proposal; AwaitingApproval the open ones of
	// a page of operations.
	Proposal(ctx context.Context, opID string) (*ops.Proposal, error)
	AwaitingApproval(ctx context.Context, opIDs []string) (map[string]*ops.Proposal, error)
	// ApprovalNeeded says whether a person's close of kind on op needs approval, and why.
	ApprovalNeeded(ctx context.Context, op *ops.Operation, kind ops.CloseKind) (bool, string, error)
	// CheckManualFail says why a person may not close op as failed by hand now, or nil.
	CheckManualFail(op *ops.Operation, attempts []ops.Attempt, now time.Time) error
	// CheckNotExecuted says why op may not be closed as not executed now, or nil.
	CheckNotExecuted(op *ops.Operation, attempts []ops.Attempt, now time.Time) error
	// CanLookUp says whether a lookup at the provider exists for op, and if not, why.
	CanLookUp(ctx context.Context, op *ops.Operation) (bool, string)
}

// mountDashboard adds the dashboard's pages; it runs inside the session group. Each
// group checks the role on the server, whatever the page offers.
func (s *Server) mountDashboard(r chi.Router) {
	support := s.forRole(r, desk.RoleSupport)
	support.Get("/ops/{id}", s.handleOpDetail)
	support.Get("/support", s.handleSupport)
	s.mountFollowUps(support)

	oncall := s.forRole(r, desk.RoleOncall)
	oncall.Post("/ops/lookup", s.handleBulkLookup)
	oncall.Post("/ops/{id}/lookup", s.handleLookup)
	oncall.Post("/ops/{id}/close", s.handleClose)
	oncall.Post("/ops/{id}/close-not-executed", s.handleCloseNotExecuted)
	oncall.Post("/ops/{id}/approve", s.handleApprove)
	oncall.Post("/ops/{id}/reject", s.handleReject)
	oncall.Get("/audit", s.handleAudit)
	s.mountBulkRuns(r)
	s.mountSavedViews(r)

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

// pathID reads the numeric {id} of the URL; anything else names no what, so it is not found.
func pathID(r *http.Request, what string) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, ops.Errorf(ops.ENOTFOUND, "There is no %s %q.", what, chi.URLParam(r, "id"))
	}
	return id, nil
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
