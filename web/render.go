package web

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/a-h/templ"
)

// render writes a component as a whole page. It renders into a buffer first so a failure
// half way becomes an error page rather than a truncated one.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		if status >= 500 {
			// Rendering the error page itself failed: fall back to plain text.
			s.Logger.ErrorContext(r.Context(), "render error page", "err", err)
			http.Error(w, http.StatusText(status), status)
			return
		}
		s.Error(w, r, fmt.Errorf("render page: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
