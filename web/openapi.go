package web

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 document of the client API: /api/v1, the chat gateway's
// Settle headers and every problem code. It is a file rather than generated from the
// handlers so client teams review it like code; TestOpenAPI sends real requests to every
// route and validates them and their answers against it, so it cannot drift.
//
//go:embed openapi.json
var openAPIDoc []byte

// handleOpenAPI serves the document without a token: generating a client needs no tenant.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDoc)
}
