// Package web is Settle's HTTP layer: the chi router, its middleware, and one file per
// resource for the dashboard pages and the JSON API.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/reqlog"
	"github.com/settle-dev/settle/static"
)

// Pinger is what /readyz needs: a database that answers and takes writes.
type Pinger interface {
	// Writable returns nil when the database takes writes: while a failover has no primary,
	// a standby may answer reads, but no work can be done.
	Writable(ctx context.Context) error
}

// Server holds the dependencies of the HTTP layer. Set the fields, then call Handler.
type Server struct {
	Accounts desk.Accounts
	Queues   desk.Queues
	DB       Pinger
	// ClockSkew, when set, is shut while this replica's clock is off the database's past
	// its limit (ops.SkewGuard): readiness then answers 503, as the replica takes no new
	// lease and its own requests would judge leases by a wrong clock.
	ClockSkew ops.Gate
	Clock     ops.Clock
	Logger    *slog.Logger
	// Sessions keeps dashboard sign-ins; build it with NewSessions. Handler sets its
	// ErrorFunc so session store failures are answered like every other error.
	Sessions *scs.SessionManager
	// Registry receives the HTTP metrics and is what /metrics exposes.
	Registry *prometheus.Registry

	Refunds        RefundTool
	Operations     OperationReader
	StripeWebhooks WebhookReceiver
	LLM            ChatGateway
	// StreamWriteTimeout bounds each write of the LLM gateway's answer to its client, and is
	// extended before every chunk of a stream: a client that stops reading loses its answer,
	// never the generation, which the gateway goes on reading and stores. Default 10 s.
	StreamWriteTimeout time.Duration
	// MaxInFlight caps the API requests (the token-authenticated /api/v1 and /v1 routes and
	// /mcp) this server works on at once. One more is answered at once with 503 and
	// Retry-After, before its body is read or anything of it is recorded, so an overload
	// sheds requests instead of growing a backlog that starves the process of memory and
	// CPU. Probes, /metrics and the dashboard are never counted: people must be able to see
	// and close operations during the overload. Zero or less: no cap.
	MaxInFlight int
	// MaxInFlightPerTenant is one tenant's share of MaxInFlight. The cap is counted before
	// the token is read, so without a share one tenant's slow requests (long LLM streams)
	// could take every place and have every other tenant's requests shed. Once a request has
	// named its tenant, one more of a tenant that already has this many in flight here is
	// answered 429 with Retry-After, recorded as that tenant's client request (ops rule 8),
	// and nothing of it is sent. Zero or less, or at least a MaxInFlight above zero: no share.
	MaxInFlightPerTenant int
	// WriteBacklog, when set, reports how long the ledger's oldest write has waited to be
	// sent (pg.DB.WriteBacklog). Beyond MaxWriteBacklog an API request is shed as at the
	// in-flight cap: most requests in flight idle on a provider, so their count says little,
	// while the ledger's queue grows first when the database or the CPU cannot keep up.
	WriteBacklog func() time.Duration
	// MaxWriteBacklog is the WriteBacklog beyond which API requests are shed; zero or
	// less: no limit.
	MaxWriteBacklog time.Duration
	shedder         *shedder
	share           *tenantShare

	// Each area of the product declares its own dependencies in its own file.
	KindDeps
	LoginDeps
	SSODeps
	MetricsDeps
	DashboardDeps
	MCPDeps
	JobsDeps
	ReconcileDeps
	AlertsDeps
	InsightsDeps
	TenantsDeps
}

// Handler returns the whole HTTP interface. Call it once per Server: it registers the HTTP
// metrics on the Registry.
func (s *Server) Handler() http.Handler {
	return s.router()
}

func (s *Server) router() *chi.Mux {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	// Every line logged while serving a request carries its identifiers.
	s.Logger = slog.New(reqlog.Handler(s.Logger.Handler()))
	if s.Clock == nil {
		s.Clock = ops.SystemClock{}
	}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	s.Sessions.ErrorFunc = s.Error
	s.initLogin()

	// Browsers say where a request comes from; refusing cross-site unsafe methods here
	// protects every form without per-form tokens.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Error(w, r, ops.Errorf(ops.EFORBIDDEN, "Cross-origin requests are refused. Open Settle directly and try again."))
	}))

	r := chi.NewRouter()
	// requestID comes first so that the access line of httpMetrics carries the request's
	// identifiers too.
	r.Use(s.requestID, newHTTPMetrics(s.Registry, s.Logger).middleware, s.recoverer, secureHeaders, cop.Handler)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "There is no page at %s.", r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here.")
	})

	r.Get("/healthz", s.handleHealth)
	r.Get("/readyz", s.handleReady)
	if !s.MetricsElsewhere {
		r.Method(http.MethodGet, "/metrics", s.metricsHandler(true))
	}
	r.Method(http.MethodGet, "/static/*", http.StripPrefix("/static/", http.FileServerFS(static.FS)))

	s.mountAPI(r)

	r.Group(func(r chi.Router) {
		r.Use(s.Sessions.LoadAndSave)
		r.Get("/login", s.handleLoginPage)
		r.Post("/login", s.handleLogin)
		r.Post("/logout", s.handleLogout)
		s.mountSSO(r)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/ops", http.StatusSeeOther)
		})
		r.Group(func(r chi.Router) {
			r.Use(s.requireUser, s.requireRole(desk.RoleSupport))
			r.Get("/ops", s.handleQueue)
		})
		s.mountDashboard(r)
		s.mountReconcile(r)
		s.mountAlerts(r)
		s.mountInsights(r)
		s.mountTenants(r)
	})
	s.mountMCP(r)
	s.mountJobs(r)
	return r
}

// mountAPI mounts the token-authenticated API and the LLM gateway, and Stripe's webhooks.
func (s *Server) mountAPI(r chi.Router) {
	// The API's routes are counted by the shedder, first of all, so a request beyond the cap
	// costs neither a token lookup nor a read of its body. On the gateway's routes it is
	// inline (With), where it sees each route's pattern for its metric; under /api/v1 it
	// runs, as the token check does, on every path there, before the sub-router matches, so
	// it looks up the route a shed request asked for (shedRoute). The probes, /metrics and
	// the dashboard are never shed: they are what people use to see and settle an overload,
	// and their load is a few people's, not the clients'. Stripe's webhooks are left out
	// too: they arrive at Stripe's pace and carry the evidence that closes operations.
	s.shedder = newShedder(s)
	api := s.shedder.limit
	// Once the token names the tenant, each route counts the request against the tenant's
	// share (tenantShare), and records one refused there as its own refusals are recorded.
	s.share = newTenantShare(s)
	// The gateway's calls, and the reads and cancels of responses, may use the places the
	// tenant's background responses hold while the gateway follows them (tenantShare).
	read, call := s.share.limit(nil), s.share.lend(s.refuseLLMCall, lendCall)
	r.Get("/api/openapi.json", s.handleOpenAPI)
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(api, s.requireToken)
		r.With(read).Get("/whoami", s.handleWhoami)
		r.With(s.share.limit(s.refuseRefund)).Post("/refunds", s.handleRefund)
		r.With(read).Get("/operations/{id}", s.handleGetOperation)
	})
	r.Post("/webhooks/stripe", s.handleStripeWebhook)
	r.With(api, s.requireToken, call).Post("/v1/chat/completions", s.handleChatCompletions)
	r.With(api, s.requireToken, call).Post("/v1/embeddings", s.handleEmbeddings)
	r.With(api, s.requireToken, call).Post("/v1/responses", s.handleResponses)
	r.With(api, s.requireToken, s.share.lend(nil, lendRead)).Get("/v1/responses/{id}", s.handleGetResponse)
	r.With(api, s.requireToken, s.share.lend(s.refuseCancel, lendRead)).Post("/v1/responses/{id}/cancel", s.handleCancelResponse)
	r.With(api, s.requireAPIKeyOrToken, call).Post("/v1/messages", s.handleMessages)
	s.registerLLMMetrics()
	s.registerBudgetMetrics()
}

// secureHeaders keeps the dashboard out of frames and stops browsers guessing content types.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
		next.ServeHTTP(w, r)
	})
}
