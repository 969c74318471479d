package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// sessionUserID is the session key holding the signed-in user's id, and
// sessionGeneration the key of the user's session generation it was signed in under.
const (
	sessionUserID     = "user_id"
	sessionGeneration = "user_session_generation"
)

// signIn makes the request's session u's, under a new token: a token planted before the
// sign-in (session fixation) is worth nothing after it. The generation comes from the same
// read of u that checked the sign-in, so a disable that lands meanwhile ends this session too.
func (s *Server) signIn(ctx context.Context, u *desk.User) error {
	if err := s.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.Sessions.Put(ctx, sessionUserID, u.ID)
	s.Sessions.Put(ctx, sessionGeneration, u.SessionGeneration)
	return nil
}

type ctxKey int

const (
	userKey ctxKey = iota
	tenantKey
)

func withUser(ctx context.Context, u *desk.User) context.Context {
	return context.WithValue(ctx, userKey, u)
}

// userFrom returns the signed-in user, or nil outside requireUser.
func userFrom(ctx context.Context) *desk.User {
	u, _ := ctx.Value(userKey).(*desk.User)
	return u
}

func viewer(u *desk.User) views.Viewer {
	return views.Viewer{Email: u.Email, Role: string(u.Role)}
}

// requireUser loads the signed-in user on every request, so a disabled account or a
// changed role takes effect at once, and sends everyone else to the login page.
func (s *Server) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := s.Sessions.GetInt64(ctx, sessionUserID)
		if id == 0 {
			redirectToLogin(w, r)
			return
		}
		u, err := s.Accounts.UserByID(ctx, id)
		// A session of an earlier generation was ended by a disable, and was written back
		// since by a request of it that was in flight then: it stays ended.
		if ops.ErrorCode(err) == ops.ENOTFOUND || (err == nil && s.Sessions.GetInt64(ctx, sessionGeneration) != u.SessionGeneration) {
			s.Sessions.Remove(ctx, sessionUserID)
			s.Sessions.Remove(ctx, sessionGeneration)
			redirectToLogin(w, r)
			return
		} else if err != nil {
			s.Error(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(s.withFollowUpBadge(withUser(ctx, u), u)))
	})
}

func redirectToLogin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// requireRole refuses users whose role does not include min. It must run after requireUser.
func (s *Server) requireRole(min desk.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := userFrom(r.Context())
			if u == nil {
				s.Error(w, r, errors.New("requireRole used without requireUser"))
				return
			}
			if !u.Role.AtLeast(min) {
				s.Error(w, r, ops.Errorf(ops.EFORBIDDEN, "This page needs the %s role or above; you are signed in as %s.", min, u.Role))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// home is where a redirect named by a request goes when safeNext refuses it.
const home = "/ops"

// safeNext keeps a redirect named by the request itself (the sign-in's next, a form's back)
// on a page of this dashboard, so that no link can use Settle to send someone elsewhere.
// It returns next only when next is already a clean path of one of the dashboard's GET
// routes, sign-in's own excepted, and /ops otherwise. Nothing is repaired, since repairs
// are where open redirects hide: browsers take a backslash for a slash and drop tabs and
// newlines, so "/\host", and "/<tab>/host" once its tab is dropped, open "//host", another
// site; and http.Redirect cleans "/./\host" into "/\host". So a next with a scheme, a host,
// a leading "//", a backslash or a control character (plain or percent-encoded), or a path
// that cleaning would change (dot segments, doubled slashes, encoded or not) is refused.
func safeNext(r *http.Request, next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, unsafeInPath) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.ContainsFunc(u.Path, unsafeInPath) || path.Clean(u.Path) != u.Path ||
		u.Path == "/login" || strings.HasPrefix(u.Path, "/login/") {
		return home
	}
	// The route is matched as the router will match the request for it: on the path as
	// sent, still encoded, when it differs from the decoded one.
	p := u.RawPath
	if p == "" {
		p = u.Path
	}
	if rc := chi.RouteContext(r.Context()); rc == nil || rc.Routes == nil || !rc.Routes.Match(chi.NewRouteContext(), http.MethodGet, p) {
		return home
	}
	return next
}

// unsafeInPath is a character no redirect path of the dashboard holds, and that browsers
// read otherwise than servers: a backslash, or a control character.
func unsafeInPath(c rune) bool {
	return c == '\\' || c < 0x20 || c == 0x7f
}

func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r, r.URL.Query().Get("next"))
	if s.Sessions.GetInt64(r.Context(), sessionUserID) != 0 {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, views.Login(s.loginPage(next)))
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The form could not be read."))
		return
	}
	if s.PasswordLoginOff {
		s.Error(w, r, ops.Errorf(ops.EFORBIDDEN, "Password sign-in is turned off on this server; use the sign-in page's single sign-on button."))
		return
	}
	page := s.loginPage(safeNext(r, r.PostForm.Get("next")))
	page.Email = r.PostForm.Get("email")
	u := s.checkPassword(w, r, page, r.PostForm.Get("password"))
	if u == nil {
		return
	}
	if err := s.signIn(ctx, u); err != nil {
		s.Error(w, r, err)
		return
	}
	s.Logger.InfoContext(ctx, "signed in", "user_id", u.ID, "role", u.Role)
	http.Redirect(w, r, page.Next, http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := s.Sessions.RenewToken(ctx); err != nil {
		s.Error(w, r, err)
		return
	}
	s.Sessions.Remove(ctx, sessionUserID)
	s.Sessions.Remove(ctx, sessionGeneration)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
