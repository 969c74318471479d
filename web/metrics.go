package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	log      *slog.Logger
	// series holds the counter and histogram of each route, method and code answered so
	// far (seriesKey), bound to their labels once rather than looked up by them per request.
	series sync.Map
}

// seriesKey names one route, method and status code's series.
type seriesKey struct {
	route, method string
	code          int
}

// seriesOf is a seriesKey's counter of requests and histogram of durations.
type seriesOf struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// of returns the series of k, binding them on the first request that needs them.
func (m *httpMetrics) of(k seriesKey) seriesOf {
	if s, ok := m.series.Load(k); ok {
		return s.(seriesOf)
	}
	s := seriesOf{
		requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.code)),
		duration: m.duration.WithLabelValues(k.route, k.method),
	}
	m.series.Store(k, s)
	return s
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
		// requestID, before it, already wraps the response to see its status: every write
		// passes through that wrapper, so its status is this request's.
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		next.ServeHTTP(ww, r)
		route := requestRoute(r)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		method := methodLabel(r.Method)
		series := m.of(seriesKey{route, method, status})
		series.requests.Inc()
		series.duration.Observe(d.Seconds())
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

// methodLabel is the method that labels r's metrics: one HTTP defines, or "other". Any
// client, before it shows a token, writes the method of its request line, and the server
// takes any token there (up to the header limit); labelled as sent, each new one would be
// new series kept until the process ends.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// requestRoute is the pattern of the route r asked for, which labels its metrics and log
// lines. A request refused under a mount (/api/v1) before its sub-router matched it, shed by
// the in-flight cap for one, has only the mount's pattern so far, /api/v1/*, whatever its
// route; the route is then looked up in the router's tree without running anything, which
// costs a walk of a few nodes and one small allocation. A path no route matches keeps the
// mount's pattern: the label is only ever a registered pattern, never the path, so ids in
// paths cannot make a series per request.
func requestRoute(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return "unmatched"
	}
	pattern := rc.RoutePattern()
	if strings.HasSuffix(pattern, "/*") && rc.Routes != nil {
		// chi routes on the escaped path when there is one; so does the look-up.
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if found := rc.Routes.Find(chi.NewRouteContext(), r.Method, path); found != "" {
			return found
		}
	}
	if pattern == "" {
		return "unmatched"
	}
	return pattern
}
