package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/web"
)

// JobsConfig is how pipeline jobs run, in serve, demo and 'settle worker'.
type JobsConfig struct {
	// Workers is how many job workers serve runs (SETTLE_WORKERS, default 2; 0 runs none,
	// for when separate 'settle worker' processes do the work).
	Workers int
	// WebhookURLs receive job.published (SETTLE_JOB_WEBHOOK_URL, comma-separated); empty,
	// a published job writes no event (ops rule 10).
	WebhookURLs []string
	// Lease is a worker's hold on a job and its generation (SETTLE_JOB_LEASE, default 30s).
	Lease time.Duration
	// RetryUncertain lets a worker resend after an uncertain attempt, counted as a possible
	// duplicate (SETTLE_JOB_RETRY_UNCERTAIN, default false: the batch policy).
	RetryUncertain bool
	// The retry budget of each job: sends, total deadline and cost.
	MaxAttempts   int
	Deadline      time.Duration
	MaxCostMicros int64
	// MetricsAddr is where 'settle worker' serves /metrics and the probes
	// (SETTLE_WORKER_METRICS_ADDR); empty, it serves nothing. MetricsToken is
	// SETTLE_METRICS_TOKEN, which its /metrics then asks for.
	MetricsAddr, MetricsToken string
}

// loadJobsEnv reads the jobs' settings from the environment.
func loadJobsEnv(e environ) (JobsConfig, error) {
	c := JobsConfig{Workers: 2, MaxAttempts: 3}
	var err error
	if v := e.get(envWorkers); v != "" {
		if c.Workers, err = strconv.Atoi(v); err != nil || c.Workers < 0 || c.Workers > 64 {
			return c, usagef("%s=%q is not a number of workers from 0 to 64", envWorkers.Name, v)
		}
	}
	for _, u := range strings.Split(e.get(envJobWebhookURL), ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if err := checkHTTPURL(envJobWebhookURL, u); err != nil {
			return c, err
		}
		c.WebhookURLs = append(c.WebhookURLs, u)
	}
	if c.Lease, err = e.duration(envJobLease, jobs.DefaultLease); err != nil {
		return c, err
	}
	if v := e.get(envJobRetryUncertain); v != "" {
		if c.RetryUncertain, err = strconv.ParseBool(v); err != nil {
			return c, usagef("%s=%q is not true or false", envJobRetryUncertain.Name, v)
		}
	}
	if v := e.get(envJobMaxAttempts); v != "" {
		if c.MaxAttempts, err = strconv.Atoi(v); err != nil || c.MaxAttempts < 1 {
			return c, usagef("%s=%q is not a positive number", envJobMaxAttempts.Name, v)
		}
		// A job's generation is one operation, which the ledger stops at its attempts
		// (ops rule 4): a larger budget would be cut there without a word.
		if most := ops.DefaultLimits.AttemptsPerOperation; c.MaxAttempts > most {
			return c, usagef("%s=%q is more than the %d attempts an operation may make", envJobMaxAttempts.Name, v, most)
		}
	}
	if c.Deadline, err = e.duration(envJobDeadline, time.Hour); err != nil {
		return c, err
	}
	if v := e.get(envJobMaxCostMicros); v != "" {
		if c.MaxCostMicros, err = strconv.ParseInt(v, 10, 64); err != nil || c.MaxCostMicros < 0 {
			return c, usagef("%s=%q is not a cost in micro-units", envJobMaxCostMicros.Name, v)
		}
	}
	return c, nil
}

// jobsConfig returns the jobs' settings of cfg. Until Config carries them (a Jobs field read
// by loadServeEnv), they are read here from the process environment.
func jobsConfig(cfg Config) (JobsConfig, error) {
	return cfg.Jobs, nil
}

// workerID is SETTLE_WORKER_ID, or hostPID.
func workerID(e environ) string {
	if id := e.get(envWorkerID); id != "" {
		return id
	}
	return hostPID()
}

// hostPID names this process by its host's name and its process id.
func hostPID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// workerCmd is 'settle worker': job workers and the relay of job events, without the HTTP
// server, until ctx ends. A job in hand is finished before it returns.
func workerCmd(ctx context.Context, cfg Config, logger *slog.Logger) error {
	jc, err := jobsConfig(cfg)
	if err != nil {
		return err
	}
	if cfg.LLM.BaseURL == "" {
		return usagef("worker: SETTLE_LLM_BASE_URL is not set; the workers call the LLM through it")
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	p := NewProgram(cfg, logger)
	if err := checkClock(ctx, cfg, p.Clock, db); err != nil {
		return err
	}
	p.DB, p.Ledger = db, ops.NewLedger(db, p.Clock)
	reg := processRegistry()
	p.startSkewGuard(ctx, reg)
	if err := p.registerJobReceivers(ctx, jc); err != nil {
		return err
	}
	pool, err := p.jobPool(jc, max(jc.Workers, 1))
	if err != nil {
		return err
	}
	if err := p.serveWorker(jc, reg); err != nil {
		return err
	}
	// After the workers' last job: a scrape during the drain still answers.
	defer p.metrics.close()
	pool.Start(ctx)
	logger.Info("job workers running", "workers", len(pool.Workers), "webhooks", len(jc.WebhookURLs), "retry_uncertain", jc.RetryUncertain)
	<-ctx.Done()
	pool.Wait()
	return nil
}

// wireJobWorkers starts serve's job workers, with their metrics on srv's registry. The
// processes that run job workers run the relay of job events, so they alone say who
// receives them: a serve whose jobs run in separate 'settle worker' processes leaves their
// registration alone.
func (p *Program) wireJobWorkers(ctx context.Context, srv *web.Server) error {
	jc := p.Config.Jobs
	if jc.Workers > 0 && p.Config.LLM.BaseURL != "" {
		if err := p.registerJobReceivers(ctx, jc); err != nil {
			return err
		}
		if srv.Registry != nil {
			srv.Registry.MustRegister(newJobRunsCollector(p.jobRuns))
		}
	}
	p.startJobWorkers(ctx, jc.Workers)
	return nil
}

// startJobWorkers starts n job workers and the relay of job events as services of the
// program, stopped with it. Without an LLM provider there is nothing to run.
func (p *Program) startJobWorkers(ctx context.Context, n int) {
	jc, err := jobsConfig(p.Config)
	if err != nil {
		p.Logger.Error("job workers not started", "err", err)
		return
	}
	if n <= 0 || p.Config.LLM.BaseURL == "" {
		return
	}
	pool, err := p.jobPool(jc, n)
	if err != nil {
		p.Logger.Error("job workers not started", "err", err)
		return
	}
	p.goService(func() {
		pool.Start(ctx)
		<-ctx.Done()
		pool.Wait()
	})
}

// jobService is the jobs API's service. When an LLM provider is configured it answers a
// job whose computation already succeeded at once.
func (p *Program) jobService() *jobs.Service {
	jc, err := jobsConfig(p.Config)
	if err != nil {
		p.Logger.Warn("jobs settings", "err", err)
	}
	s := &jobs.Service{Store: jobstore.New(p.DB), Ledger: p.Ledger, Catalog: jobs.DefaultCatalog(), Clock: p.Clock, MaxAttempts: jc.MaxAttempts,
		Deadline: jc.Deadline, MaxCostMicros: jc.MaxCostMicros, Logger: p.Logger}
	// Admission refuses a budgeted tenant's job of a model the workers' table does not price.
	if prices, err := p.Config.LLM.prices(); err == nil {
		// The gateway's and the workers' budgets: /metrics counts its refusals with theirs.
		s.Prices, s.Budgets = prices, p.llmBudgets(prices)
	} else {
		p.Logger.Warn("price table", "err", err)
	}
	if p.Config.LLM.BaseURL != "" {
		if pool, err := p.jobPool(jc, 1); err == nil {
			s.Reuse = pool.Workers[0]
		}
	}
	return s
}

// jobPool builds n workers calling the LLM through the same upstream adapter as the
// gateway, and the relay of job events when webhooks are configured.
func (p *Program) jobPool(jc JobsConfig, n int) (*jobs.Pool, error) {
	up, prices, err := p.Config.LLM.upstream()
	if err != nil {
		return nil, err
	}
	id := p.Config.WorkerID
	if id == "" {
		id = hostPID()
	}
	// Leases tell workers apart by owner, so two processes must never share one: a mark of
	// this pool's own keeps them apart even when two replicas are given one worker id.
	id = ops.NewOwner(id, "")
	pool := &jobs.Pool{Gate: p.gate()}
	// One cache of the tenants' spends serves every worker of the pool, and the gateway.
	budgets := p.llmBudgets(prices)
	for i := range n {
		pool.Workers = append(pool.Workers, &jobs.Worker{Store: jobstore.New(p.DB), Events: p.DB, Ledger: jobs.NewLedger(p.DB, p.Clock, jc.Lease, jc.RetryUncertain),
			Upstream: up, Prices: prices, Budgets: budgets, Catalog: jobs.DefaultCatalog(), Owner: ops.NewOwner("jobs", fmt.Sprintf("%s:%d", id, i)),
			Logger: p.Logger, Runs: p.jobRuns})
	}
	if len(jc.WebhookURLs) > 0 {
		pool.Relay = &outbox.Relay{Store: pg.JobOutbox{DB: p.DB}, Publisher: jobs.NewWebhooks(jc.WebhookURLs, nil), Clock: p.Clock,
			Interval: time.Second, Hold: jc.Lease, Keep: p.Config.OutboxKeep, Logger: p.Logger}
	}
	return pool, nil
}

// registerJobReceivers registers SETTLE_JOB_WEBHOOK_URL's receivers, under the setting's
// name, as the consumer of every tenant's job events, so that jobs published from now on
// write them (ops rule 10). Without the setting it removes that registration and the
// events still waiting for it: nobody delivers them any more, and each keeps its job's
// result past every purge; a receiver configured later receives no event of earlier jobs.
func (p *Program) registerJobReceivers(ctx context.Context, jc JobsConfig) error {
	store := jobstore.New(p.DB)
	if len(jc.WebhookURLs) > 0 {
		if err := store.RegisterEventConsumer(ctx, envJobWebhookURL.Name, 0, p.Clock.Now()); err != nil {
			return fmt.Errorf("register the job events' receivers: %w", err)
		}
		return nil
	}
	n, err := store.RemoveEventConsumer(ctx, envJobWebhookURL.Name)
	if err != nil {
		return fmt.Errorf("remove the job events' former receivers: %w", err)
	}
	if n > 0 {
		p.Logger.Info("deleted job events nobody receives", "events", n, "setting", envJobWebhookURL.Name)
	}
	return nil
}
