package web

import (
	"context"
	"net/http"
	"time"
)

// handleHealth says the process is up; it checks nothing else so an orchestrator does not
// restart a healthy process because its database blinked.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// handleReady says whether the process can do its work, which needs the database.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.DB.Ping(ctx); err != nil {
		s.Logger.WarnContext(r.Context(), "not ready: database does not answer", "err", err)
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "The database does not answer.")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}
