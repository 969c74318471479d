package web

import (
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
)

// Session lifetimes: an idle dashboard signs out after half an hour, and nobody stays signed
// in for longer than a working day.
const (
	SessionIdleTimeout = 30 * time.Minute
	SessionLifetime    = 12 * time.Hour
)

// NewSessions returns the dashboard's session manager on store (pg.DB.SessionStore in
// production). secure marks the cookie HTTPS-only; leave it off for plain-HTTP local use.
func NewSessions(store scs.Store, secure bool) *scs.SessionManager {
	sm := scs.New()
	sm.Store = store
	sm.IdleTimeout = SessionIdleTimeout
	sm.Lifetime = SessionLifetime
	sm.Cookie.Name = "settle_session"
	sm.Cookie.Path = "/"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = secure
	return sm
}
