package web

import (
	"net/http"

	"github.com/settle-dev/settle/ops"
)

// handleChatCompletions is the OpenAI-compatible gateway route.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "The LLM gateway is not configured."))
}
