package web

import "net/http"

// WithRequestIDMiddleware wraps h in the request-id middleware, to test it before
// server.go mounts it.
func (s *Server) WithRequestIDMiddleware(h http.Handler) http.Handler { return s.requestID(h) }
