package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

func withTenant(ctx context.Context, t *ops.Tenant) context.Context {
	return context.WithValue(ctx, tenantKey, t)
}

// tenantFrom returns the tenant of the API token, or nil outside requireToken.
func tenantFrom(ctx context.Context) *ops.Tenant {
	t, _ := ctx.Value(tenantKey).(*ops.Tenant)
	return t
}

// callAgainNote is what a request that met an outage of the database before it reached its
// flow (its token could not be read) tells the client to do.
const callAgainNote = "Call again with the same request (the same arguments or Idempotency-Key) in a few seconds."

// requireToken resolves the bearer token to its tenant; every API handler is scoped by it.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return s.tokenAuth(next, func(r *http.Request) (string, error) {
		token, ok := bearerToken(r)
		if !ok {
			return "", ops.Errorf(ops.EUNAUTHORIZED, "Send an API token as 'Authorization: Bearer stl_...'.")
		}
		return token, nil
	})
}

// requireAPIKeyOrToken is requireToken for Anthropic's Messages API: its clients send their
// key as x-api-key (Anthropic's SDKs before 1.0, and curl as Anthropic documents it) or as a
// bearer token (the SDKs since), so the Settle token is taken from either; sent in both, the
// two must be the same token.
func (s *Server) requireAPIKeyOrToken(next http.Handler) http.Handler {
	return s.tokenAuth(next, func(r *http.Request) (string, error) {
		key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
		token, ok := bearerToken(r)
		switch {
		case key != "" && ok && key != token:
			return "", ops.Errorf(ops.EUNAUTHORIZED, "Send one API token, as x-api-key or as 'Authorization: Bearer stl_...', not two different ones.")
		case key != "":
			return key, nil
		case ok:
			return token, nil
		}
		return "", ops.Errorf(ops.EUNAUTHORIZED, "Send an API token as 'x-api-key: stl_...' or 'Authorization: Bearer stl_...'.")
	})
}

// bearerToken is the request's bearer token, if it sent one.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// tokenAuth resolves the API token that token reads from a request to its tenant.
func (s *Server) tokenAuth(next http.Handler, token func(*http.Request) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := token(r)
		if err != nil {
			s.Error(w, r, err)
			return
		}
		t, err := s.Accounts.TenantByToken(r.Context(), tok)
		if err != nil {
			s.Error(w, r, ops.NothingSent(err, callAgainNote))
			return
		}
		reqlog.Set(r.Context(), reqlog.Tenant, t.Name)
		next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), t)))
	})
}

// handleWhoami tells a client which tenant its token belongs to, to check a configuration.
func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"tenant": tenantFrom(r.Context()).Name})
}
