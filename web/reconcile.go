package web

import "github.com/go-chi/chi/v5"

// ReconcileDeps are the dependencies of the reconciliation pages.
type ReconcileDeps struct{}

// mountReconcile adds the reconciliation pages; it runs inside the session group.
func (s *Server) mountReconcile(r chi.Router) {}
