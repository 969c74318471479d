package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

const (
	demoTenant   = "demo"
	demoPassword = "settle-demo"
)

// demoUsers are the demo's logins, one per role.
var demoUsers = []struct {
	email string
	role  desk.Role
}{
	{"oncall@demo.settle", desk.RoleOncall},
	{"support@demo.settle", desk.RoleSupport},
	{"manager@demo.settle", desk.RoleManager},
	{"admin@demo.settle", desk.RoleAdmin},
}

// demo runs everything on a private, durable Postgres cluster in the project folder, so a
// second run finds the first run's data.
func demo(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	fk, err := startDemoStripe(&cfg)
	if err != nil {
		return err
	}
	defer fk.Close()
	fl, err := startDemoLLM(&cfg)
	if err != nil {
		return err
	}
	defer fl.Close()
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: cfg.DemoDir, Durable: true})
	if err != nil {
		return fmt.Errorf("start the demo database: %w", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logger.Error("stop the demo database", "err", err)
		}
	}()
	// The cluster is the demo's alone, so its maintenance database holds the tables.
	cfg.DatabaseURL = cluster.URL("postgres")
	cfg.Migrate = true

	p := NewProgram(cfg, logger)
	defer p.Close()
	if err := p.Run(ctx); err != nil {
		return err
	}
	for _, u := range demoUsers {
		_, err := p.DB.CreateUser(ctx, u.email, demoPassword, u.role)
		if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
			return fmt.Errorf("create demo user %s: %w", u.email, err)
		}
	}
	// Tokens are kept only as hashes, so each run makes a fresh one to show.
	token, err := ensureToken(ctx, p.DB, demoTenant, "demo")
	if err != nil {
		return err
	}
	tenant, err := p.DB.EnsureTenant(ctx, demoTenant)
	if err != nil {
		return err
	}
	traffic := &demoTraffic{p: p, fake: fk, tenant: tenant, token: token, log: logger,
		webhookURL: p.URL() + "/webhooks/stripe"}
	go traffic.run(ctx)

	fmt.Fprintf(stdout, "Settle demo is running at %s\n\nSign in with any of these (password %q):\n", p.URL(), demoPassword)
	for _, u := range demoUsers {
		fmt.Fprintf(stdout, "  %-22s %s\n", u.email, u.role)
	}
	fmt.Fprintf(stdout, "\nAPI token for tenant %q:\n  %s\n\nThe data stays in %s. Press Ctrl-C to stop.\n", demoTenant, token, cluster.Dir)
	return p.Wait(ctx)
}
