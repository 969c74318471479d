package web

import (
	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
)

// OpenAPIDoc is the embedded document, for the test that checks it against the handlers.
var OpenAPIDoc = openAPIDoc

// ProblemCodes are the codes of the status table, plus the two written without it: internal
// (anything not Settle's on purpose) and method_not_allowed.
func ProblemCodes() []string {
	codes := []string{ops.EINTERNAL, "method_not_allowed"}
	for c := range httpStatus {
		codes = append(codes, c)
	}
	return codes
}

// Routes is the server's router, to walk its routes. Like Handler, call it once per Server.
func (s *Server) Routes() chi.Routes { return s.router() }
