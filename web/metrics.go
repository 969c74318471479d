package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	log      *slog.Logger
}

func newHTTPMetrics(reg *prometheus.Registry, log *slog.Logger) *httpMetrics {
	return &httpMetrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"})),
		log: log,
	}
}

// register adds c to reg, or returns the collector already there, so building a second
// handler on the same registry keeps counting into the same series.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// middleware labels by route pattern, not path, so ids in paths cannot explode the number
// of series.
func (m *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route, r.Method).Observe(d.Seconds())
		level := slog.LevelInfo
		switch route {
		case "/healthz", "/readyz", "/metrics", "/static/*":
			// Probes and scrapes arrive every few seconds; they would drown the log.
			level = slog.LevelDebug
		}
		m.log.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.Duration("duration", d))
	})
}
