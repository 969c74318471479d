package web

import (
	"crypto/subtle"
	"net/http"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/settle-dev/settle/ops"
)

// MetricsDeps says who may read /metrics, whose series carry every tenant's names and
// figures. With neither field set, /metrics is on the main handler for loopback clients
// only: a Prometheus on the same host, or a sidecar.
type MetricsDeps struct {
	// MetricsToken, when set, is the bearer token every /metrics request must carry,
	// wherever /metrics is served; a request without it gets 401.
	MetricsToken string
	// MetricsElsewhere takes /metrics off Handler: MetricsHandler serves it on a listener
	// of its own, to whoever reaches that listener (and bears MetricsToken when set).
	MetricsElsewhere bool
}

// MetricsHandler serves /metrics alone, for the listener of its own that MetricsElsewhere
// means; other paths are 404. Call it after Handler, on the same Server.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metricsHandler(false))
	return mux
}

// metricsHandler is the Prometheus exposition behind the access check: the token when one
// is set, else, when loopbackOnly, a loopback peer. The peer is the connection's address,
// never X-Forwarded-For, which any client can write.
func (s *Server) metricsHandler(loopbackOnly bool) http.Handler {
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	expo := promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{Registry: s.Registry})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.MetricsToken != "":
			if !bearerIs(r, s.MetricsToken) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="settle-metrics"`)
				writeProblem(w, http.StatusUnauthorized, ops.EUNAUTHORIZED, "/metrics needs Authorization: Bearer with the token in SETTLE_METRICS_TOKEN.")
				return
			}
		case loopbackOnly && !fromLoopback(r):
			writeProblem(w, http.StatusForbidden, ops.EFORBIDDEN,
				"/metrics answers loopback clients only. To scrape it from elsewhere, set SETTLE_METRICS_TOKEN and send it as a bearer token, or serve it on SETTLE_METRICS_ADDR.")
			return
		}
		expo.ServeHTTP(w, r)
	})
}

// bearerIs reports whether r carries "Authorization: Bearer token", comparing in constant
// time so the answer's timing says nothing about how much of a guess was right.
func bearerIs(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// fromLoopback reports whether the request comes from this host itself. A request that a
// proxy forwarded, as its headers say, is not: a reverse proxy on this host would otherwise
// make every client of the proxy look local. Prometheus sends none of these headers.
func fromLoopback(r *http.Request) bool {
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
