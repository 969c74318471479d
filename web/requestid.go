package web

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/settle-dev/settle/ops/reqlog"
	"github.com/settle-dev/settle/views"
)

// requestID gives every request an id, sends it back in X-Request-Id, starts the request's
// log fields with it (package reqlog), and puts it where the error page shows it, so a person reporting "Internal error" can quote something an
// engineer finds in the logs. X-Request-Id means only this id: a client's own id is not
// trusted (it could collide on purpose) and travels as its request ref (X-Request-Ref, see
// requestRef), and a provider's id of its request goes out as Settle-Provider-Request-Id.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		w.Header().Set("X-Request-Id", id)
		ctx := views.WithRequestID(reqlog.Start(r.Context(), id), id)
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(ctx))
		switch st := ww.Status(); {
		case st == http.StatusBadGateway || st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
			// A provider that failed or timed out, or a part not configured: expected in
			// operation and counted elsewhere, so not an error of Settle's own.
			s.Logger.WarnContext(ctx, "request answered with a provider or dependency failure",
				"method", r.Method, "path", r.URL.Path, "status", st)
		case st >= 500:
			s.Logger.ErrorContext(ctx, "request answered with a server error",
				"method", r.Method, "path", r.URL.Path, "status", st)
		}
	})
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
