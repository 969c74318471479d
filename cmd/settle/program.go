package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// maxShutdownTimeout is the longest SETTLE_SHUTDOWN_TIMEOUT, unless the longest call in
// flight needs more (longestCall): an LLM call at its default deadline of 10 minutes, with
// room to record it. A longer wait finishes nothing the reaper would not resume after it,
// and holds the rollout or the node drain waiting on the process; a value far beyond it is
// a slip (35h for 35s).
const maxShutdownTimeout = 15 * time.Minute

// longestCall is the longest a call the server may have in flight runs: a refund, and a
// gateway call when the LLM gateway is on.
func longestCall(refundDeadline time.Duration, l LLMConfig) time.Duration {
	if !l.gatewayOn() {
		return refundDeadline
	}
	return max(refundDeadline, l.Deadline)
}

// gatewayOn says whether the server runs the LLM gateway: a provider's base URL is set.
func (c LLMConfig) gatewayOn() bool { return c.BaseURL != "" || c.AnthropicBaseURL != "" }

// shutdownTimeoutEnv reads SETTLE_SHUTDOWN_TIMEOUT: by default the longest call plus
// shutdownMargin. A wait shorter than the LLM deadline is taken, and warned of at start
// (warnShortShutdown): where the orchestrator kills the process after a fixed grace period
// anyway, refusing to start would help no call.
func shutdownTimeoutEnv(e environ, refundDeadline time.Duration, l LLMConfig) (time.Duration, error) {
	longest := longestCall(refundDeadline, l)
	d, err := e.duration(envShutdownTimeout, longest+shutdownMargin)
	if err != nil {
		return d, err
	}
	switch limit := max(maxShutdownTimeout, longest+shutdownMargin); {
	case d > limit && limit == maxShutdownTimeout:
		err = usagef("%s=%s is longer than 15 minutes: no call Settle runs needs that long, and what is left is resumed by the reaper", envShutdownTimeout.Name, d)
	case d > limit:
		err = usagef("%s=%s is longer than %s=%s plus %s: no call Settle runs needs that long, and what is left is resumed by the reaper",
			envShutdownTimeout.Name, d, envLLMDeadline.Name, l.Deadline, shutdownMargin)
	}
	return d, err
}

// shutdownMargin is what the default shutdown timeout adds to the refund deadline: time to
// record a refund Stripe answered at the last moment and write its answer.
const shutdownMargin = 10 * time.Second

// A request's headers must arrive within defaultReadHeaderTimeout, and the whole request,
// body included, within defaultReadTimeout: the largest body Settle reads (4 MiB, a chat
// completion or an MCP call) makes it at about 1.1 Mbit/s. A client that trickles its
// headers or never finishes its body is cut off then, even when the handler did not read
// the body, since net/http reads what a handler left before answering. net/http lifts the
// read deadline once the body is read, so an answer that takes longer, or streams for
// minutes, is not cut; the LLM gateway's writes have deadlines of their own
// (web.Server.StreamWriteTimeout).
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 30 * time.Second
)

// Program is one running server: its database, sessions and HTTP listener. Tests run it on
// port 0 with the same wiring as 'settle serve'.
type Program struct {
	Config Config
	Logger *slog.Logger
	Clock  ops.Clock

	// DB, Ledger and Refunds are ready after Run succeeds; Refunds is nil without Stripe.
	DB     *pg.DB
	Ledger *ops.Ledger
	// gateway is the LLM gateway when a provider is configured; it knows each call's policy.
	gateway *llm.Gateway
	// budgets is the one cache of the tenants' LLM spends the gateway and this process's job
	// workers check, and count their budget refusals in (llmBudgets).
	budgets     *llm.Budgets
	budgetsOnce sync.Once
	Refunds     *refund.Tool
	// stripe is the one Stripe adapter when a key is set: the refund tool, the webhooks and
	// the reconciler share its read limit.
	stripe *stripe.Adapter
	// metrics is /metrics's own listener when SETTLE_METRICS_ADDR is set (serve), or
	// SETTLE_WORKER_METRICS_ADDR ('settle worker').
	metrics metricsListener
	// jobRuns counts the runs of this process's job workers, which its /metrics exports.
	jobRuns *jobs.Runs
	// skew shuts the loops that take leases while the clock is off the database's; nil
	// until Run starts it.
	skew *ops.SkewGuard

	// readHeaderTimeout and readTimeout are the defaults above; tests shorten them.
	readHeaderTimeout, readTimeout time.Duration

	// stopServices tells the session sweep and the background services to start no new
	// work; swept and services say when they stopped.
	stopServices context.CancelFunc
	swept        chan struct{}
	services     sync.WaitGroup
	listener     net.Listener
	server       *http.Server
	served       chan error
	closing      sync.Once
	closeErr     error
}

// NewProgram returns a program for cfg; nothing is opened until Run.
func NewProgram(cfg Config, logger *slog.Logger) *Program {
	return &Program{Config: cfg, Logger: logger, Clock: ops.SystemClock{}, served: make(chan error, 1), jobRuns: &jobs.Runs{},
		readHeaderTimeout: defaultReadHeaderTimeout, readTimeout: defaultReadTimeout}
}

// Run opens the database, checks or migrates its schema, starts listening and serves in the
// background. It returns once requests are accepted, or with the reason they cannot be.
func (p *Program) Run(ctx context.Context) error {
	p.warnShortShutdown()
	ssoDeps, err := p.ssoDeps(ctx)
	if err != nil {
		return err
	}
	db, err := p.openDB(ctx)
	if err != nil {
		return err
	}
	if ssoDeps.SSO != nil {
		if ssoDeps.SSOFlows, err = p.ssoFlows(ctx, db); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", p.Config.Addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return &ops.Error{Code: ops.ECONFLICT, Err: err,
			Message: fmt.Sprintf("listen on %s: address already in use; choose another with --addr or SETTLE_ADDR", p.Config.Addr)}
	} else if err != nil {
		return fmt.Errorf("listen on %s: %w", p.Config.Addr, err)
	}
	p.listener = ln

	reg := processRegistry()
	bgCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopServices, p.swept = stop, make(chan struct{})
	go p.sweepSessions(bgCtx)
	p.startSkewGuard(bgCtx, reg)
	accounts, desks := accountstore.New(db), deskstore.New(db)
	srv := &web.Server{
		// API calls read their token from a 5-second cache; revocation takes up to 5 s.
		Accounts:  &web.TokenCache{Accounts: accounts, TTL: 5 * time.Second, Clock: p.Clock},
		Queues:    desks,
		DB:        db,
		ClockSkew: p.gate(),
		Clock:     p.Clock,
		Logger:    p.Logger,
		// No cleanup goroutine in the store: sweepSessions does that job and stops cleanly.
		Sessions:   web.NewSessions(db.SessionStore(), p.Config.SecureCookies),
		Registry:   reg,
		Operations: db,
		Refunds:    unconfiguredRefunds{},
		MCPDeps:    web.MCPDeps{RefundStatus: db},
		LoginDeps:  web.LoginDeps{LoginAudit: desks, TrustedProxies: p.Config.Web.TrustedProxies},
	}
	ssoDeps.SSOUsers = accounts
	srv.SSODeps = ssoDeps
	srv.MaxInFlight, srv.MaxInFlightPerTenant = p.Config.Web.MaxInFlight, p.Config.Web.MaxInFlightPerTenant
	srv.WriteBacklog, srv.MaxWriteBacklog = db.WriteBacklog, p.Config.Web.MaxWriteBacklog
	srv.MetricsDeps = web.MetricsDeps{MetricsToken: p.Config.Web.MetricsToken, MetricsElsewhere: p.Config.Web.MetricsAddr != ""}
	if err := p.wireLedger(bgCtx, srv); err != nil {
		return err
	}
	p.wireAlerts(bgCtx, p.Config.Alerts, srv, reg)
	p.server = &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: p.readHeaderTimeout,
		ReadTimeout:       p.readTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := p.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.served <- fmt.Errorf("serve: %w", err)
		}
		close(p.served)
	}()
	return p.serveMetrics(srv)
}

// openDB opens the database as p.DB, refuses a clock off the database's before anything
// takes a lease, and checks or migrates the schema.
func (p *Program) openDB(ctx context.Context) (*pg.DB, error) {
	db, err := openDB(ctx, p.Config)
	if err != nil {
		return nil, err
	}
	p.DB = db
	if err := checkClock(ctx, p.Config, p.Clock, db); err != nil {
		return nil, err
	}
	if p.Config.Migrate {
		if err := db.Migrate(ctx); err != nil {
			return nil, err
		}
	} else if err := db.CheckSchema(ctx); err != nil {
		// An old schema would fail later and in odd places; refuse now and say how to fix it.
		return nil, err
	}
	return db, nil
}

// registerKinds registers with l every kind of operation Settle handles, each described by
// the package that opens it: its default policy, its lookup and its wording. The jobs'
// default policy follows SETTLE_JOB_RETRY_UNCERTAIN.
func registerKinds(l *ops.Ledger, jobsRetryUncertain bool) {
	l.Register(refund.Kind(), llm.Kind(), jobs.Kind(jobsRetryUncertain))
}

// wireLedger builds the ledger, the refund tool when Stripe is configured, the LLM gateway
// when a provider is, the dashboard's tools, and the background services: the reaper of
// stalled and expired operations, the reconciler and the outbox relay.
func (p *Program) wireLedger(ctx context.Context, srv *web.Server) error {
	cfg := p.Config
	p.Ledger = ops.NewLedger(p.DB, p.Clock)
	registerKinds(p.Ledger, cfg.Jobs.RetryUncertain)
	srv.Kinds = p.Ledger
	p.Ledger.Limits = operationLimits(p.Ledger.Limits, cfg.OperationLease)
	// Requests too: a retry that reaches this replica while its clock is off would judge
	// the first request's lease by it.
	p.Ledger.Gate = p.gate()
	senders := map[ops.Kind]ops.Sender{}
	srv.Refunds = unconfiguredRefunds{ledger: p.Ledger}
	if cfg.Stripe.APIKey != "" {
		adapter := cfg.Stripe.adapter(p.DB)
		p.stripe = adapter
		if srv.Registry != nil {
			srv.Registry.MustRegister(newStripeReadsCollector(adapter))
		}
		p.Refunds = &refund.Tool{Ledger: p.Ledger, Store: p.DB, Provider: adapter, Deadline: cfg.Stripe.Deadline,
			TenantKey: cfg.Stripe.TenantKey, AnyTenantsPayments: cfg.Stripe.AnyTenantsPayments}
		srv.Refunds = p.Refunds
		senders[ops.KindRefund] = adapter
		if cfg.Stripe.WebhookSecret != "" || cfg.Stripe.ConnectWebhookSecret != "" {
			srv.StripeWebhooks = &stripe.Webhooks{Adapter: adapter, Ledger: p.Ledger, Events: p.DB}
		}
	}
	// Without Stripe, Desk.Refunds stays nil and lookups answer "unavailable".
	accounts, desks := accountstore.New(p.DB), deskstore.New(p.DB)
	dsk := &desk.Desk{Ledger: p.Ledger, Refunds: p.Refunds, Events: p.DB, Audit: desks, Bulk: desks,
		Approvals: cfg.Web.Approvals, Proposals: p.DB, People: accounts, SSOIssuer: cfg.Web.SSO.Provider.Issuer}
	srv.DashboardDeps = web.DashboardDeps{
		Desk: dsk, Bulk: dsk, SavedViews: &desk.SavedViews{Store: desks, Audit: desks, Clock: p.Clock}, Timelines: desks,
		SupportSearch: desks, AuditLog: desks, UserAdmin: accounts, TokenAdmin: accounts, JobViews: jobstore.New(p.DB),
		FollowUps: &desk.FollowUps{Store: desks, Clock: p.Clock},
	}
	rollups := rollupstore.New(p.DB)
	srv.Recon, srv.Exceptions = rollups, reconstore.New(p.DB)
	srv.InsightsDeps, srv.TenantsDeps = web.InsightsDeps{Insights: rollups, Firings: alertstore.New(p.DB)}, web.TenantsDeps{Tenants: p.DB}
	p.startRollups(ctx)
	p.startBodyPurge(ctx)
	p.startRetention(ctx)
	usage, err := p.wireLLM(srv)
	if err != nil {
		return err
	}
	p.startReconciler(ctx, cfg.Reconcile.Interval, usage...)
	srv.JobsDeps = web.JobsDeps{Jobs: p.jobService()}
	// Each bulk lookup is claimed in its own row, so every replica may run them.
	bulk := &desk.BulkRunner{Desk: dsk, Queues: desks, Owner: ops.NewOwner("bulk", cfg.WorkerID), Logger: p.Logger}
	p.goLoop(ctx, bulk.Loop())
	if err := p.wireJobWorkers(ctx, srv); err != nil {
		return err
	}
	// A call released for its client's retry waits for that client at least as long as one of
	// its requests may last (SETTLE_LLM_DEADLINE).
	reaper := &ops.Reaper{Ledger: p.Ledger, Owner: ops.NewOwner("reaper", cfg.WorkerID), Interval: reaperInterval(p.Ledger.Limits.Lease),
		Senders: senders, Logger: p.Logger, ClientWait: max(ops.DefaultClientWait, cfg.LLM.Deadline)}
	p.goLoop(ctx, reaper.Loop())
	p.startFollowUpRelays(ctx, cfg.Notify, cfg.OutboxKeep)
	if cfg.OutboxURL != "" {
		// Changes write their outbox events only while a consumer is registered for them
		// (ops rule 10); this server's receiver takes every tenant's and kind's.
		if err := p.DB.RegisterOutboxConsumer(ctx, envOutboxURL.Name, 0, "", p.Clock.Now()); err != nil {
			return fmt.Errorf("register the outbox's receiver: %w", err)
		}
		relay := &outbox.Relay{Store: p.DB, Publisher: &outbox.Webhook{URL: cfg.OutboxURL}, Clock: p.Clock,
			Interval: time.Second, Keep: cfg.OutboxKeep, Logger: p.Logger}
		p.goLoop(ctx, relay.Loop("outbox relay"))
	} else if err := p.DB.RemoveOutboxConsumer(ctx, envOutboxURL.Name); err != nil {
		// A receiver taken out of the configuration consumes nothing any more: its
		// registration would keep every change writing an event nobody delivers, for good.
		return fmt.Errorf("remove the outbox's former receiver: %w", err)
	}
	return nil
}

func (p *Program) goService(run func()) {
	p.services.Add(1)
	go func() {
		defer p.services.Done()
		run()
	}()
}

// unconfiguredRefunds answers the refund route when no Stripe key is set. Its refusals
// named their tenant, so each is recorded as that tenant's refused refund request
// (ops rule 8) when it has a ledger.
type unconfiguredRefunds struct {
	ledger *ops.Ledger
}

func (u unconfiguredRefunds) Refund(ctx context.Context, req refund.Request) (refund.Answer, error) {
	return refund.Answer{}, u.Refuse(ctx, req.TenantID, req.RequestRef,
		ops.Errorf(ops.EUNAVAILABLE, "Refunds are off: this server has no STRIPE_API_KEY."))
}

func (u unconfiguredRefunds) Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error {
	if u.ledger == nil || tenantID <= 0 {
		return refusal
	}
	return u.ledger.Refuse(ctx, tenantID, ops.KindRefund, requestRef, refusal)
}

// sessionSweepInterval is how often expired sessions are deleted.
const sessionSweepInterval = 5 * time.Minute

// sweepSessions deletes expired sessions until ctx ends, so the table does not grow
// with every sign-in that was never signed out. Every replica sweeps: a second sweep
// deletes nothing more.
func (p *Program) sweepSessions(ctx context.Context) {
	defer close(p.swept)
	ops.NewLoop(p.Logger, "session sweep", sessionSweepInterval, func(ctx context.Context, log *slog.Logger) (bool, error) {
		n, err := p.DB.DeleteExpiredSessions(ctx, p.Clock.Now())
		if err == nil && n > 0 {
			log.DebugContext(ctx, "deleted expired sessions", "count", n)
		}
		return false, err
	}).Run(ctx)
}

// URL is where the running program answers.
func (p *Program) URL() string {
	if p.listener == nil {
		return ""
	}
	return "http://" + p.listener.Addr().String()
}

// Wait blocks until ctx is done (nil) or the server stops on its own (its error).
func (p *Program) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-p.served:
		return err
	}
}

// Close stops the program without losing what is under way: the listener closes and the
// background services start no new work at once; requests in flight and the services'
// work in hand (a provider call above all) finish and are recorded, for up to the shutdown
// timeout; the database closes last. It is safe to call after a failed Run, and more than
// once.
func (p *Program) Close() error {
	p.closing.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

// warnShortShutdown says, once at start, that a stop may cut an LLM call the provider is
// still generating: the call was sent, and paid, its answer would not reach its client, and
// its operation would stay uncertain until a lookup or a person settles it (ops rule 11),
// where a client's retry of an Anthropic call, which has no lookup, may pay again.
func (p *Program) warnShortShutdown() {
	l := p.Config.LLM
	if d := p.ShutdownTimeout(); p.Logger != nil && l.gatewayOn() && d < l.Deadline {
		p.Logger.Warn("the shutdown's wait is shorter than the LLM deadline: a stop may cut LLM calls already sent, and paid, before their clients have the answer",
			envShutdownTimeout.Name, d.String(), envLLMDeadline.Name, l.Deadline.String())
	}
}

// ShutdownTimeout is how long Close waits for requests in flight and the background
// services' work in hand: Config.ShutdownTimeout, or the longest call plus shutdownMargin
// for a Config that LoadConfig did not read.
func (p *Program) ShutdownTimeout() time.Duration {
	if d := p.Config.ShutdownTimeout; d > 0 {
		return d
	}
	return longestCall(p.Config.Stripe.Deadline, p.Config.LLM) + shutdownMargin
}

func (p *Program) close() error {
	timeout := p.ShutdownTimeout()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The services stop beside the requests, not after them: both finish their provider
	// calls within the one timeout.
	if p.stopServices != nil {
		p.stopServices()
	}
	var errs []error
	if p.server != nil {
		// Shutdown closes the listener, then waits for every handler to return.
		if err := p.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down HTTP server: requests still running after %s: %w", timeout, err))
		}
	} else if p.listener != nil {
		p.listener.Close()
	}
	if p.gateway != nil {
		// An LLM call answered before its close returns its handler while the close is
		// still being written: it must reach the database before the pool closes.
		if err := p.gateway.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down LLM gateway after %s: %w", timeout, err))
		}
	}
	p.metrics.close()
	stopped := make(chan struct{})
	go func() {
		if p.swept != nil {
			<-p.swept
		}
		p.services.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("background services still running after %s", timeout))
	}
	// Last: whatever finished above has been recorded. What did not is cut off here and
	// left to the reaper, as after a crash.
	if p.DB != nil {
		p.DB.Close()
	}
	return errors.Join(errs...)
}
