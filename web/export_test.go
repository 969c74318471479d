package web

import (
	"net/http"

	"github.com/settle-dev/settle/ops/desk"
)

// HandlerWithPage is Handler plus one signed-in page at pattern that needs role min, so
// tests can check role refusals before the product has a page above the lowest role.
func (s *Server) HandlerWithPage(pattern string, min desk.Role, h http.HandlerFunc) http.Handler {
	r := s.router()
	r.With(s.Sessions.LoadAndSave, s.requireUser, s.requireRole(min)).Get(pattern, h)
	return r
}
