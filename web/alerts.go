package web

import "github.com/go-chi/chi/v5"

// AlertsDeps are the dependencies of the alert pages.
type AlertsDeps struct{}

// mountAlerts adds the alert pages; it runs inside the session group.
func (s *Server) mountAlerts(r chi.Router) {}
