package web

import "github.com/go-chi/chi/v5"

// JobsDeps are the dependencies of the pipeline jobs API.
type JobsDeps struct{}

// mountJobs adds the jobs API.
func (s *Server) mountJobs(r chi.Router) {}
