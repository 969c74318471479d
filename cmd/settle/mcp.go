package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/refund"
)

// mcpStdio serves the refund tools to one local agent over stdin and stdout, acting for the
// tenant of the API token in SETTLE_MCP_TOKEN. Logs go to the logger (stderr): stdout
// carries the protocol.
func mcpStdio(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	return serveMCPStdio(ctx, cfg, cfg.MCPToken, stdin, stdout, logger)
}

// serveMCPStdio is mcpStdio with the token given, so tests need no environment. It opens
// its own database pool and refund tool, wired as 'settle serve' wires them, so a call over
// stdio takes the same path as POST /api/v1/refunds. Stalled operations it leaves behind
// are picked up by the reaper of 'settle serve'.
func serveMCPStdio(ctx context.Context, cfg Config, token string, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	if token == "" {
		return usagef("mcp --stdio: set %s to an API token made with 'settle token add'", envMCPToken.Name)
	}
	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	db, err := pg.Open(openCtx, cfg.DatabaseURL, dbOptions(cfg)...)
	cancel()
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	// The token is checked once: a stdio server lives as long as its one client.
	tenant, err := db.TenantByToken(ctx, token)
	if err != nil {
		return fmt.Errorf("mcp --stdio: check %s: %w", envMCPToken.Name, err)
	}
	var refunds mcptool.Refunder = unconfiguredRefunds{}
	if cfg.Stripe.APIKey != "" {
		adapter := cfg.Stripe.adapter(db)
		refunds = &refund.Tool{Ledger: ops.NewLedger(db, ops.SystemClock{}), Store: db, Provider: adapter, Deadline: cfg.Stripe.Deadline,
			TenantKey: cfg.Stripe.TenantKey, AnyTenantsPayments: cfg.Stripe.AnyTenantsPayments}
	}
	tools := &mcptool.Tools{Refunds: refunds, Status: db, Tenant: mcptool.FixedTenant(tenant), Logger: logger}
	transport := mcptool.StampTransport(&mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	logger.Info("serving the refund tools on stdio", "tenant", tenant.Name)
	err = tools.NewServer().Run(ctx, transport)
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		// The agent hung up or we were told to stop: both are a normal end.
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp --stdio: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
