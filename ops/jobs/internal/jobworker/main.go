// Command jobworker is a job worker process for the crash tests of package jobs: the same
// wiring as 'settle worker', read from the environment, so a test can run it as a real
// subprocess, kill it with SIGKILL at a crash point and start it again. The crash point is
// this test binary's own setting: it installs a Worker hook that kills the process there;
// the settle binary has no such setting. Its store mode is its own setting too, so the tests
// can run it with nothing stored at the provider to look up.
//
//	DATABASE_URL                 the database
//	SETTLE_LLM_BASE_URL          the OpenAI-compatible provider (the fake LLM in tests)
//	SETTLE_LLM_API_KEY           its key
//	SETTLE_JOB_WEBHOOK_URL       receivers of job.published, comma-separated
//	SETTLE_WORKERS               workers in the process (default 2)
//	SETTLE_JOB_LEASE             the job and generation lease (default 30s)
//	SETTLE_JOB_RETRY_UNCERTAIN   true lets a worker resend after an uncertain attempt
//	JOBWORKER_CRASH_POINT        after_response, after_result or after_publish: SIGKILL there
//	JOBWORKER_LLM_STORE          auto (default), on or off, as SETTLE_LLM_STORE sets settle's store mode
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "jobworker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	point := os.Getenv("JOBWORKER_CRASH_POINT")
	if point != "" && !slices.Contains(jobs.CrashPoints, point) {
		return fmt.Errorf("JOBWORKER_CRASH_POINT=%q: use one of %s", point, strings.Join(jobs.CrashPoints, ", "))
	}
	db, err := pg.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	lease, err := time.ParseDuration(envOr("SETTLE_JOB_LEASE", "30s"))
	if err != nil {
		return fmt.Errorf("SETTLE_JOB_LEASE: %w", err)
	}
	n, err := strconv.Atoi(envOr("SETTLE_WORKERS", "2"))
	if err != nil {
		return fmt.Errorf("SETTLE_WORKERS: %w", err)
	}
	retry, _ := strconv.ParseBool(envOr("SETTLE_JOB_RETRY_UNCERTAIN", "false"))
	up, err := openai.New(openai.Config{BaseURL: os.Getenv("SETTLE_LLM_BASE_URL"), APIKey: os.Getenv("SETTLE_LLM_API_KEY"),
		AttemptTimeout: lease / 2, Store: openai.StoreMode(os.Getenv("JOBWORKER_LLM_STORE"))})
	if err != nil {
		return err
	}
	clock := ops.SystemClock{}
	pool := &jobs.Pool{}
	for i := range n {
		pool.Workers = append(pool.Workers, &jobs.Worker{Store: jobstore.New(db), Events: db, Ledger: jobs.NewLedger(db, clock, lease, retry),
			Upstream: up, Prices: llm.DefaultPrices(), Catalog: jobs.DefaultCatalog(),
			Owner: ops.NewOwner("jobworker", fmt.Sprintf("%d-%d", os.Getpid(), i)), Hooks: jobs.WorkerHooks{AtPoint: crashAt(point, logger)},
			Poll: 100 * time.Millisecond, Logger: logger})
	}
	// The relay's hold on an event it delivers ends with the lease, so an event a killed
	// process held is delivered again as soon as its jobs are taken over.
	if urls := os.Getenv("SETTLE_JOB_WEBHOOK_URL"); urls != "" {
		// As settle's servers do: a job writes its event only while a receiver of it is
		// registered (ops rule 10).
		if err := jobstore.New(db).RegisterEventConsumer(ctx, "SETTLE_JOB_WEBHOOK_URL", 0, clock.Now()); err != nil {
			return fmt.Errorf("register the job events' receivers: %w", err)
		}
		pool.Relay = &outbox.Relay{Store: pg.JobOutbox{DB: db}, Publisher: jobs.NewWebhooks(strings.Split(urls, ","), nil),
			Clock: clock, Interval: 100 * time.Millisecond, Hold: lease, Logger: logger}
	}
	pool.Start(ctx)
	logger.Info("job workers started", "workers", n, "crash_point", point)
	<-ctx.Done()
	pool.Wait()
	return nil
}

// crashAt returns the hook that kills the process with SIGKILL at the named point, or nil
// when no point is named.
func crashAt(point string, logger *slog.Logger) func(string) {
	if point == "" {
		return nil
	}
	return func(at string) {
		if at != point {
			return
		}
		logger.Warn("crash point reached; killing the process", "point", at)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // no deferred function, no cleanup, like a machine that died
		select {}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
