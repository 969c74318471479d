package web

import "github.com/go-chi/chi/v5"

// MCPDeps are the dependencies of the MCP server at /mcp.
type MCPDeps struct{}

// mountMCP adds the MCP server.
func (s *Server) mountMCP(r chi.Router) {}
