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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			s.Error(w, r, ops.Errorf(ops.EUNAUTHORIZED, "Send an API token as 'Authorization: Bearer stl_...'."))
			return
		}
		t, err := s.Accounts.TenantByToken(r.Context(), strings.TrimSpace(token))
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
