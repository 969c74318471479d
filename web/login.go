package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// LoginDeps is what signing in needs beyond Accounts: see login_throttle.go for the waits.
type LoginDeps struct {
	// LoginAudit records each wrong password and the first refusal of each wait in the
	// audit log (action login.failed, login.throttled; actor ip:ADDRESS); nil records none.
	LoginAudit desk.AuditWriter
	// PasswordChecks caps concurrent password hashing; nil gives one slot per CPU and a
	// one-second wait.
	PasswordChecks *HashLimiter
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client of a
	// sign-in. Behind a proxy left out, every client shares the proxy's address.
	TrustedProxies []netip.Prefix

	logins *loginThrottle
}

// initLogin fills in the sign-in defaults; router calls it.
func (s *Server) initLogin() {
	if s.PasswordChecks == nil {
		s.PasswordChecks = NewHashLimiter(runtime.NumCPU(), time.Second)
	}
	s.logins = newLoginThrottle(s.Clock)
}

// checkPassword runs one sign-in through the throttle and the hashing cap. It returns the
// user, or answers the request itself and returns nil: 429 within a wait, 503 when every
// hashing slot stays busy, 401 for a wrong password, and the error page for anything else.
func (s *Server) checkPassword(w http.ResponseWriter, r *http.Request, page views.LoginPage, password string) *desk.User {
	ctx := r.Context()
	addr := clientAddr(r, s.TrustedProxies)
	attempt, wait, first := s.logins.admit(loginAccount(page.Email), addr)
	if attempt == nil {
		if first {
			s.auditLogin(ctx, "login.throttled", page.Email, addr, map[string]any{"retry_after_seconds": seconds(wait)})
		}
		page.Error = "Too many failed sign-ins. Try again in " + secondsText(wait) + "."
		s.renderLoginRefusal(w, r, http.StatusTooManyRequests, wait, page)
		return nil
	}
	if !s.PasswordChecks.Acquire(ctx) {
		attempt.abandon()
		page.Error = "Settle is busy checking other sign-ins. Try again in a moment."
		s.renderLoginRefusal(w, r, http.StatusServiceUnavailable, time.Second, page)
		return nil
	}
	u, err := func() (*desk.User, error) {
		defer s.PasswordChecks.Release()
		return s.Accounts.Authenticate(ctx, page.Email, password)
	}()
	switch code := ops.ErrorCode(err); {
	case err == nil:
		attempt.succeed()
		return u
	case code == ops.EUNAUTHORIZED || code == ops.EINVALID:
		f := attempt.fail()
		s.auditLogin(ctx, "login.failed", page.Email, addr, map[string]any{
			"failures": f.failures, "address_failures": f.addressFailures, "retry_after_seconds": seconds(f.wait)})
		page.Error = ops.ErrorMessage(err)
		if f.wait > 0 {
			page.Error += " Wait " + secondsText(f.wait) + " before trying again."
		}
		s.renderLoginRefusal(w, r, http.StatusUnauthorized, f.wait, page)
	default:
		attempt.abandon()
		s.Error(w, r, err)
	}
	return nil
}

// renderLoginRefusal shows the sign-in page again with its message, the email kept, and
// Retry-After when there is a wait.
func (s *Server) renderLoginRefusal(w http.ResponseWriter, r *http.Request, status int, wait time.Duration, page views.LoginPage) {
	if wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(seconds(wait)))
	}
	s.render(w, r, status, views.Login(page))
}

// auditLogin records a refused sign-in. A failure to record is logged, not answered: the
// person at the form has nothing to do about it.
func (s *Server) auditLogin(ctx context.Context, action, email, addr string, after map[string]any) {
	if s.LoginAudit == nil {
		return
	}
	b, err := json.Marshal(after)
	if err != nil {
		b = nil
	}
	e := desk.AuditLogEntry{At: s.Clock.Now(), Actor: "ip:" + addr, Action: action, Entity: "login",
		EntityID: auditEmail(email), After: b}
	if err := s.LoginAudit.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		s.Logger.WarnContext(ctx, "record a refused sign-in in the audit log", "action", action, "err", err)
	}
}

// auditEmail is what the audit log keeps of the email a sign-in named: the address when it
// is one, else a placeholder, so a password typed into the wrong field is never kept. Anyone
// may post the form, so an address that would show the people reading the log another one
// (desk.CheckEmailShows) is no address either.
func auditEmail(email string) string {
	e := loginAccount(email)
	if a, err := mail.ParseAddress(e); err != nil || a.Address != e || a.Name != "" || len(e) > 254 || desk.CheckEmailShows(e) != nil {
		return "(not an email address)"
	}
	return e
}

// seconds is d in whole seconds, rounded up, as Retry-After counts.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

func secondsText(d time.Duration) string {
	if n := seconds(d); n != 1 {
		return fmt.Sprintf("%d seconds", n)
	}
	return "1 second"
}
