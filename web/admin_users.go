package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// UserAdmin lists and changes dashboard users; every change is recorded in the audit log.
type UserAdmin interface {
	Users(ctx context.Context) ([]desk.UserAccount, error)
	SetUserRole(ctx context.Context, id int64, role desk.Role, actor string, now time.Time) error
	SetUserDisabled(ctx context.Context, id int64, disabled bool, actor string, now time.Time) error
	RecordAudit(ctx context.Context, e desk.AuditLogEntry) error
}

func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) {
	s.renderUsers(w, r, http.StatusOK, s.popFlash(r.Context()).view(), "", string(desk.RoleSupport))
}

func (s *Server) renderUsers(w http.ResponseWriter, r *http.Request, status int, f views.Flash, email, role string) {
	if s.UserAdmin == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	users, err := s.UserAdmin.Users(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	me := userFrom(ctx)
	m := views.UsersPage{Viewer: viewer(me), Flash: f, FormEmail: email, FormRole: role}
	for _, ro := range desk.Roles {
		m.Roles = append(m.Roles, string(ro))
	}
	for _, u := range users {
		row := views.UserRow{ID: strconv.FormatInt(u.ID, 10), Email: u.Email, Role: string(u.Role),
			Created: formatTime(u.CreatedAt), Disabled: u.DisabledAt != nil, Self: u.ID == me.ID}
		if row.Disabled {
			row.StoppedFollows = u.OpenFollows
		}
		m.Users = append(m.Users, row)
	}
	s.render(w, r, status, views.Users(m))
}

// handleAddUser adds a user. A refused form is shown again with the reason and the email
// kept, never the password.
func (s *Server) handleAddUser(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.UserAdmin != nil) {
		return
	}
	ctx := r.Context()
	email, role := r.PostForm.Get("email"), desk.Role(r.PostForm.Get("role"))
	u, err := s.Accounts.CreateUser(ctx, email, r.PostForm.Get("password"), role)
	if code := ops.ErrorCode(err); code == ops.EINVALID || code == ops.ECONFLICT {
		s.renderUsers(w, r, http.StatusUnprocessableEntity, views.Flash{Kind: "error", Message: ops.ErrorMessage(err)}, email, string(role))
		return
	} else if err != nil {
		s.Error(w, r, err)
		return
	}
	after, _ := json.Marshal(map[string]any{"email": u.Email, "role": u.Role})
	if err := s.UserAdmin.RecordAudit(ctx, desk.AuditLogEntry{At: s.Clock.Now(), Actor: actor(r), Action: "user.add",
		Entity: "user", EntityID: strconv.FormatInt(u.ID, 10), After: after}); err != nil {
		s.Error(w, r, err)
		return
	}
	s.putFlash(ctx, flashMsg{Kind: "ok", Message: fmt.Sprintf("Added %s as %s.", u.Email, u.Role)})
	http.Redirect(w, r, "/admin/users", http.StatusSeeOther)
}

func (s *Server) handleUserRole(w http.ResponseWriter, r *http.Request) {
	s.changeUser(w, r, func(ctx context.Context, id int64) (string, error) {
		role := desk.Role(r.PostForm.Get("role"))
		if !role.Valid() {
			return "", ops.Errorf(ops.EINVALID, "Unknown role %q; use one of support, oncall, manager, admin.", r.PostForm.Get("role"))
		}
		return "Role changed to " + string(role) + ".", s.UserAdmin.SetUserRole(ctx, id, role, actor(r), s.Clock.Now())
	})
}

func (s *Server) handleUserDisable(w http.ResponseWriter, r *http.Request) {
	s.changeUser(w, r, func(ctx context.Context, id int64) (string, error) {
		if err := s.UserAdmin.SetUserDisabled(ctx, id, true, actor(r), s.Clock.Now()); err != nil {
			return "", err
		}
		s.endSessionsOf(ctx, id)
		return "User disabled; their sessions end now, and the operations they follow send them nothing until they are enabled again.", nil
	})
}

// endSessionsOf signs user id out of every session. A disabled account's sessions are
// refused at their next request anyway, but one unused while it was disabled would
// otherwise work again once it is enabled: the person who took it (an open laptop, a
// copied cookie) is why it was disabled. A failure is logged: the account stays disabled.
func (s *Server) endSessionsOf(ctx context.Context, id int64) {
	err := s.Sessions.Iterate(ctx, func(ctx context.Context) error {
		if s.Sessions.GetInt64(ctx, sessionUserID) != id {
			return nil
		}
		return s.Sessions.Destroy(ctx)
	})
	if err != nil {
		s.Logger.ErrorContext(ctx, "end the sessions of a disabled user", "user_id", id, "err", err)
	}
}

func (s *Server) handleUserEnable(w http.ResponseWriter, r *http.Request) {
	s.changeUser(w, r, func(ctx context.Context, id int64) (string, error) {
		return "User enabled.", s.UserAdmin.SetUserDisabled(ctx, id, false, actor(r), s.Clock.Now())
	})
}

// changeUser runs one change to another user. Admins cannot change themselves here, so
// nobody locks the last admin out by a slip.
func (s *Server) changeUser(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, id int64) (string, error)) {
	if !s.formFor(w, r, s.UserAdmin != nil) {
		return
	}
	ctx := r.Context()
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "No such user."))
		return
	}
	if id == userFrom(ctx).ID {
		s.Error(w, r, ops.Errorf(ops.EFORBIDDEN, "You cannot change your own account here; ask another admin."))
		return
	}
	msg, err := change(ctx, id)
	if ops.ErrorCode(err) == ops.EINVALID {
		s.putFlash(ctx, flashMsg{Kind: "error", Message: ops.ErrorMessage(err)})
	} else if err != nil {
		s.Error(w, r, err)
		return
	} else {
		s.putFlash(ctx, flashMsg{Kind: "ok", Message: msg})
	}
	http.Redirect(w, r, "/admin/users", http.StatusSeeOther)
}
