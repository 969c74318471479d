package web

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ReasonOverloaded is the code of an API request refused because the server already works
// on Server.MaxInFlight of them, or because the ledger's writes wait longer than
// Server.MaxWriteBacklog to be sent.
const ReasonOverloaded = "overloaded"

// The reasons a request is shed, as settle_http_shed_total's reason label names them.
const (
	shedInFlight     = "in_flight"
	shedWriteBacklog = "write_backlog"
)

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
// with Retry-After, keeps the work in hand small enough to finish. The count alone comes
// late: most requests in flight wait on a provider, idle, so the shedder also refuses work
// while the ledger's writes, which every API request makes first, wait too long to be sent.
type shedder struct {
	max      int64
	inFlight atomic.Int64
	shed     *prometheus.CounterVec
	srv      *Server
	// backlog is the ledger's write backlog (nil: not known), maxBacklog its limit (0: none).
	backlog    func() time.Duration
	maxBacklog time.Duration

	// lastWarn is when the last warning was logged (Unix nanoseconds of srv.Clock);
	// unwarned counts the requests shed since.
	lastWarn, unwarned atomic.Int64
}

func newShedder(s *Server) *shedder {
	sh := &shedder{
		max: int64(s.MaxInFlight),
		shed: register(s.Registry, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_http_shed_total",
			Help: "API requests refused with 503 before any work, by the pattern of the route they asked for (under /api/v1 " +
				"the mount's, /api/v1/*, when none matches) and reason: in_flight " +
				"(SETTLE_MAX_IN_FLIGHT were in flight) or write_backlog (the ledger's writes waited beyond SETTLE_MAX_WRITE_BACKLOG).",
		}, []string{"route", "reason"})),
		srv:        s,
		backlog:    s.WriteBacklog,
		maxBacklog: s.MaxWriteBacklog,
	}
	if sh.backlog == nil {
		sh.backlog = func() time.Duration { return 0 }
	}
	register(s.Registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "settle_ledger_write_backlog_seconds",
		Help: "How long the oldest ledger write waiting to be sent has waited; beyond SETTLE_MAX_WRITE_BACKLOG API requests are shed.",
	}, func() float64 { return sh.backlog().Seconds() }))
	// The gauge reads the count the cap is checked against when scraped, so a request pays
	// for one counter, not two.
	register(s.Registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "settle_http_in_flight",
		Help: "API requests (/api/v1, /v1, /mcp) being answered now; beyond SETTLE_MAX_IN_FLIGHT they are shed.",
	}, func() float64 { return float64(sh.inFlight.Load()) }))
	return sh
}

// limit counts a request in flight until its handler returns (a stream until its last
// chunk), or refuses it at once when the ledger's writes are behind or the cap is reached.
// It runs before authentication and before the body is read, so a shed request costs no
// database statement and leaves no trace in the ledger: the client may send it again as if
// it had never been sent.
func (sh *shedder) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh.maxBacklog > 0 && sh.backlog() > sh.maxBacklog {
			sh.refuse(w, r, shedWriteBacklog)
			return
		}
		if !sh.admit() {
			sh.refuse(w, r, shedInFlight)
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

// shedMessages tell a shed client why, by reason, and that it may send the request again as new.
var shedMessages = map[string]string{
	shedInFlight: "Settle is answering as many API requests as it takes at once; this one was not read and nothing of it " +
		"was recorded or sent. Send it again in a second.",
	shedWriteBacklog: "Settle's ledger is behind with its writes, so it takes no new API requests for now; this one was not " +
		"read and nothing of it was recorded or sent. Send it again in a second.",
}

func (sh *shedder) refuse(w http.ResponseWriter, r *http.Request, reason string) {
	route := requestRoute(r)
	sh.shed.WithLabelValues(route, reason).Inc()
	sh.warn(r, route, reason)
	sh.srv.Error(w, r, &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonOverloaded, Message: shedMessages[reason],
		Err: &llm.Problem{RetryAfter: shedRetryAfter}})
}

// warn logs the shed request unless a warning was logged within shedLogEvery; the next
// warning then says how many were shed meanwhile, whatever their reason.
func (sh *shedder) warn(r *http.Request, route, reason string) {
	sh.unwarned.Add(1)
	now := sh.srv.Clock.Now().UnixNano()
	last := sh.lastWarn.Load()
	if last != 0 && now-last < int64(shedLogEvery) || !sh.lastWarn.CompareAndSwap(last, now) {
		return
	}
	msg, attrs := "API request shed: too many in flight", []slog.Attr{slog.Int64("max_in_flight", sh.max)}
	if reason == shedWriteBacklog {
		msg = "API request shed: the ledger's writes are behind"
		attrs = []slog.Attr{slog.String("write_backlog", sh.backlog().String()),
			slog.String("max_write_backlog", sh.maxBacklog.String())}
	}
	attrs = append(attrs, slog.String("route", route), slog.String("reason", reason), slog.Int64("shed", sh.unwarned.Swap(0)))
	sh.srv.Logger.LogAttrs(r.Context(), slog.LevelWarn, msg, attrs...)
}
