package web

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ReasonOverloaded is the code of an API request refused because the server already works
// on Server.MaxInFlight of them.
const ReasonOverloaded = "overloaded"

// shedRetryAfter is how long a shed client is asked to wait. Requests in flight end within
// a second or so on a healthy machine, and a client that waits longer only lengthens the
// outage it sees.
const shedRetryAfter = time.Second

// shedLogEvery spaces the warnings about shed requests: an overload sheds thousands a
// second, and one line per request would add to the load it reports.
const shedLogEvery = time.Second

// shedder bounds the API requests in flight. A starved machine answers slower, so requests
// pile up, each holding its body and its answer in memory, until the garbage collector
// near the soft memory limit takes the CPU the requests need. Refusing the excess at once,
// with Retry-After, keeps the work in hand small enough to finish.
type shedder struct {
	max      int64
	inFlight atomic.Int64
	shed     *prometheus.CounterVec
	srv      *Server

	// lastWarn is when the last warning was logged (Unix nanoseconds of srv.Clock);
	// unwarned counts the requests shed since.
	lastWarn, unwarned atomic.Int64
}

func newShedder(s *Server) *shedder {
	sh := &shedder{
		max: int64(s.MaxInFlight),
		shed: register(s.Registry, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_http_shed_total",
			Help: "API requests refused with 503 before any work because SETTLE_MAX_IN_FLIGHT were in flight, by route pattern.",
		}, []string{"route"})),
		srv: s,
	}
	// The gauge reads the count the cap is checked against when scraped, so a request pays
	// for one counter, not two.
	register(s.Registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "settle_http_in_flight",
		Help: "API requests (/api/v1, /v1, /mcp) being answered now; beyond SETTLE_MAX_IN_FLIGHT they are shed.",
	}, func() float64 { return float64(sh.inFlight.Load()) }))
	return sh
}

// limit counts a request in flight until its handler returns (a stream until its last
// chunk), or refuses it at once when the cap is reached. It runs before authentication and
// before the body is read, so a shed request costs no database statement and leaves no
// trace in the ledger: the client may send it again as if it had never been sent.
func (sh *shedder) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sh.admit() {
			sh.refuse(w, r)
			return
		}
		defer sh.inFlight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// admit takes a place, or reports false, taking none, when every place is taken.
func (sh *shedder) admit() bool {
	for {
		n := sh.inFlight.Load()
		if sh.max > 0 && n >= sh.max {
			return false
		}
		if sh.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (sh *shedder) refuse(w http.ResponseWriter, r *http.Request) {
	route := "unmatched"
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		route = rc.RoutePattern()
	}
	sh.shed.WithLabelValues(route).Inc()
	sh.warn(r, route)
	sh.srv.Error(w, r, &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonOverloaded,
		Message: "Settle is answering as many API requests as it takes at once; this one was not read and nothing of it " +
			"was recorded or sent. Send it again in a second.",
		Err: &llm.Problem{RetryAfter: shedRetryAfter}})
}

// warn logs the shed request unless a warning was logged within shedLogEvery; the next
// warning then says how many were shed meanwhile.
func (sh *shedder) warn(r *http.Request, route string) {
	sh.unwarned.Add(1)
	now := sh.srv.Clock.Now().UnixNano()
	last := sh.lastWarn.Load()
	if last != 0 && now-last < int64(shedLogEvery) || !sh.lastWarn.CompareAndSwap(last, now) {
		return
	}
	sh.srv.Logger.LogAttrs(r.Context(), slog.LevelWarn, "API request shed: too many in flight",
		slog.String("route", route), slog.Int64("max_in_flight", sh.max), slog.Int64("shed", sh.unwarned.Swap(0)))
}
