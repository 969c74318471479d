package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/internal/demo"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// demoSetupSteps counts the demo's setup for its progress: the fake Stripe, the fake LLM,
// the database, the program with its migrations, the users, and the tenant and token.
const demoSetupSteps = 6

// demoCmd runs everything on a private, durable Postgres cluster in the project folder, so a
// second run finds the first run's data. The setup's progress goes to stderr, so stdout
// keeps only the banner.
func demoCmd(ctx context.Context, cfg Config, logger *slog.Logger, stdout, stderr io.Writer) error {
	days, err := parseHistoryDays(cfg.DemoHistory)
	if err != nil {
		return err
	}
	if err := checkDemoDir(cfg.DemoDir); err != nil {
		return err
	}
	// A first run creates a cluster and runs every migration, which takes long enough to
	// look stuck without it.
	setup := newReporter("demo setup", stderr, logger)
	setup.Start(demoSetupSteps, "steps")
	defer setup.Done() // ends the line before an error is printed after it
	// The fakes read the history's simulated clock while it is written, the wall clock after.
	fakes, err := demo.StartFakes()
	if err != nil {
		return err
	}
	defer fakes.Close()
	configureDemoFakes(&cfg, fakes)
	setup.Add(2)
	cluster, err := startDemoDatabase(ctx, &cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logger.Error("stop the demo database", "err", err)
		}
	}()
	setup.Add(1)
	if days > 0 {
		setup.Done()
		if err := demoHistory(ctx, cfg, days, fakes, logger, newReporter("demo history", stderr, logger)); err != nil {
			return err
		}
		setup.Start(demoSetupSteps-3, "steps")
	}

	p := NewProgram(cfg, logger)
	defer p.Close()
	tenant, token, err := runDemoProgram(ctx, p, setup)
	if err != nil {
		return err
	}
	setup.Done()
	traffic := demo.NewTraffic(demo.Server{URL: p.URL(), DB: p.DB, Ledger: p.Ledger, Refunds: p.Refunds}, fakes, tenant, token,
		newReporter("demo backfill", stderr, logger), logger)
	go traffic.Run(ctx)
	demo.PrintBanner(stdout, p.URL(), token, cluster.Dir)
	return p.Wait(ctx)
}

// checkListenAddr refuses a listen address of command that is not host:port, or, for the
// demo, not on loopback.
func checkListenAddr(command, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return usagef("%s: address %q is not host:port, e.g. 127.0.0.1:8080", command, addr)
	}
	if command == "demo" {
		return checkDemoAddr(addr)
	}
	return nil
}

// checkDemoAddr refuses a listen address other than loopback: the demo's logins and
// password are published in the README, so on any other address its dashboard, admin
// included, is anyone's on the network. An empty host listens on every interface.
func checkDemoAddr(addr string) error {
	if host, _, _ := net.SplitHostPort(addr); !loopback(host) {
		return usagef("demo: address %q is not a loopback address, and the demo's logins are public; use 127.0.0.1:PORT or localhost:PORT", addr)
	}
	return nil
}

// checkDemoDir refuses a --dir that holds files but no Postgres cluster: the cluster's
// start would give the folder to the postgres user (when settle runs as root) and then fail
// in initdb, which makes a cluster only in an empty folder. A new folder, an empty one, or an
// earlier demo's cluster is fine.
func checkDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usagef("demo: --dir %s cannot be read as a folder: %v", dir, errors.Unwrap(err))
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		return usagef("demo: --dir %s holds files but no Postgres cluster; give a new or empty folder, or an earlier demo's", dir)
	}
	return nil
}

// configureDemoFakes points cfg at the demo's fakes, with short timeouts so the demo shows
// timeouts and retries within seconds.
func configureDemoFakes(cfg *Config, f *demo.Fakes) {
	cfg.Stripe = StripeConfig{APIKey: "sk_test_demo", WebhookSecret: f.StripeWebhookSecret, APIBase: f.StripeBase,
		Timeout: 2 * time.Second, Deadline: 6 * time.Second}
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.ProviderName = f.LLMBase, "sk-demo", "openai"
	cfg.LLM.AttemptTimeout, cfg.LLM.Deadline = 3*time.Second, 20*time.Second
	cfg.LLM.AnthropicBaseURL, cfg.LLM.AnthropicAPIKey = f.AnthropicBase, "sk-ant-demo"
}

// startDemoDatabase starts the demo's durable cluster in cfg.DemoDir and points cfg at it,
// with migrations on.
func startDemoDatabase(ctx context.Context, cfg *Config) (*localpg.Cluster, error) {
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: cfg.DemoDir, Durable: true})
	if err != nil {
		return nil, fmt.Errorf("start the demo database: %w", err)
	}
	// The cluster is the demo's alone, so its maintenance database holds the tables.
	cfg.DatabaseURL = cluster.URL("postgres")
	cfg.Migrate = true
	return cluster, nil
}

// runDemoProgram runs the program and gives the demo its people, its tenant and a fresh API
// token for it (demo.Setup), counting three steps of the setup.
func runDemoProgram(ctx context.Context, p *Program, setup *Reporter) (*ops.Tenant, string, error) {
	if err := p.Run(ctx); err != nil {
		return nil, "", err
	}
	setup.Add(1)
	return demo.Setup(ctx, p.DB, setup)
}

// demoHistory writes days of history into a new demo database before the server starts
// (demo.History), on its own pool with asynchronous commits, as nothing of it is worth a
// flush per refund.
func demoHistory(ctx context.Context, cfg Config, days int, f *demo.Fakes, logger *slog.Logger, progress *Reporter) error {
	db, err := pg.Open(ctx, cfg.DatabaseURL, append(dbOptions(cfg), pg.WithAsyncCommit())...)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	return demo.History(ctx, db, days, f, progress, logger)
}

// maxHistoryDays bounds the demo's history: the rollups keep minute rows 35 days, and a
// longer history only takes longer to write.
const maxHistoryDays = 35

// parseHistoryDays reads the demo's --history: a whole number of days such as 30d, or 0.
func parseHistoryDays(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), "d"))
	if err != nil || n < 0 || n > maxHistoryDays || (n > 0 && !strings.HasSuffix(v, "d")) {
		return 0, usagef("demo: --history %q is not a number of days from 0d to %dd, such as 30d", v, maxHistoryDays)
	}
	return n, nil
}
