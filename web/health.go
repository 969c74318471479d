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

// handleReady says whether the process can do its work, which needs a database that takes
// writes: during a failover it answers 503 from the moment the primary is lost until a
// promoted standby answers, so a load balancer sends requests to no replica that would fail
// them. It answers within 2 s, a host that does not answer included. A replica whose clock
// is off the database's past the limit answers 503 too: it takes no new lease, and the
// requests it would serve judge leases by that clock.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.DB.Writable(ctx); err != nil {
		s.Logger.WarnContext(r.Context(), "not ready: no writable database answers", "err", err)
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "No writable database answers.")
		return
	}
	if s.ClockSkew != nil {
		// Not logged here, at every probe: the guard logs one line as the skew starts.
		if err := s.ClockSkew.Open(); err != nil {
			writeProblem(w, http.StatusServiceUnavailable, "unavailable",
				"This replica's clock is off the database's; it takes no new lease until it is back in step.")
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}
