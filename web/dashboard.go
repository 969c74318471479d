package web

import "github.com/go-chi/chi/v5"

// DashboardDeps are the dependencies of the operator dashboard's pages.
type DashboardDeps struct{}

// mountDashboard adds the dashboard's pages; it runs inside the session group.
func (s *Server) mountDashboard(r chi.Router) {}
